#!/usr/bin/env bash
# test_devmem_ptds: per-thread default streams of different threads are
# different streams: a block freed on one thread's behind a late kernel is
# not another thread's before the kernel ran.  Same output without the shim
# and under the pool (expandable and caching), two seeds.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_ptds
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
EMU_SEED=1 "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
for seed in 1 3; do
  for mode in expandable caching; do
    out=$tmp/$mode.$seed
    EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode "$prog" > "$out" 2> "$out.err" \
      || { echo "FAIL: $mode run (seed $seed):"; cat "$out" "$out.err"; fail=1; continue; }
    diff "$tmp/plain" "$out" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$out"; fail=1; }
    if grep -q "trainshim" "$out.err"; then echo "FAIL: $mode (seed $seed) stderr:"; cat "$out.err"; fail=1; fi
  done
done
[ $fail = 0 ] && echo "devmem ptds ok: $(cat "$tmp/plain")"
exit $fail
