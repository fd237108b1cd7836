#!/usr/bin/env bash
# The demo training job (build/workloads/mlp_train: every step cudaMallocs and
# cudaFrees its activations and gradients) served by trainshim's device
# allocator: every step's loss and the final weights checksum are bit-identical
# to the run without the shim, in the expandable and caching modes, under
# emulator jitter and several seeds; the pool really serves it (the
# runtime's cudaMalloc no longer reaches cuMemAlloc_v2, while with
# TRAINSHIM_ALLOC=off every one does).
set -u
B=${B:-build}
bin=$PWD/$B/workloads/mlp_train
shim=$PWD/$B/libtrainshim.so
for f in "$bin" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
nested() { awk -v n="$2" '$1 == n { v = $3 } END { print v + 0 }' "$1"; }
outer() { awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }' "$1"; }
for seed in 1 7 4242; do
  EMU_SEED=$seed "$bin" 10 256 > "$tmp/plain.$seed" || { echo "FAIL: plain run (seed $seed)"; exit 1; }
  grep -q '^weights checksum [0-9a-f]\{16\}$' "$tmp/plain.$seed" || { echo "FAIL: no checksum line"; cat "$tmp/plain.$seed"; exit 1; }
  for mode in expandable caching off; do
    EMU_SEED=$seed TRAINSHIM_ALLOC=$mode TRAINSHIM_DEBUG_COUNTS="$tmp/counts.$mode.$seed" LD_PRELOAD="$shim" \
      "$bin" 10 256 > "$tmp/$mode.$seed" 2> "$tmp/$mode.$seed.err" || { echo "FAIL: $mode run (seed $seed):"; cat "$tmp/$mode.$seed.err"; fail=1; continue; }
    cmp -s "$tmp/plain.$seed" "$tmp/$mode.$seed" || { echo "FAIL: $mode (seed $seed) output differs:"; diff "$tmp/plain.$seed" "$tmp/$mode.$seed" | head; fail=1; }
  done
done
c=$tmp/counts.expandable.1; mallocs=$(outer "$c" cudaMalloc); drv=$(nested "$c" cuMemAlloc_v2)
[ "$mallocs" -ge 100 ] && [ "$drv" = 0 ] || { echo "FAIL: expandable: $mallocs cudaMalloc, $drv reached cuMemAlloc_v2 (want 0)"; fail=1; }
# (the pool's own segments come from the real cuMemAlloc_v2 directly, unseen by the hooks)
c=$tmp/counts.caching.1; drv=$(nested "$c" cuMemAlloc_v2)
[ "$drv" = 0 ] || { echo "FAIL: caching: $drv cudaMalloc reached cuMemAlloc_v2 through the runtime (want 0)"; fail=1; }
c=$tmp/counts.off.1; drv=$(nested "$c" cuMemAlloc_v2)
[ "$drv" = "$mallocs" ] || { echo "FAIL: off: $drv cuMemAlloc_v2 for $mallocs cudaMalloc (want every one)"; fail=1; }
[ $fail = 0 ] && echo "devmem demo ok: $mallocs cudaMalloc; through the runtime to cuMemAlloc_v2: expandable 0, caching 0, off $(nested "$tmp/counts.off.1" cuMemAlloc_v2)"
exit $fail
