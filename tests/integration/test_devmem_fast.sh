#!/usr/bin/env bash
# test_devmem_fast under trainshim's device allocator: device switches through
# the runtime and the driver (unhooked context changes) give blocks of the
# current device; blocks freed with cudaFree / cudaFreeAsync while a slow
# kernel still reads them are not handed out by the thread caches until it
# is done (exact sums); same output as without the shim, in the expandable
# and caching modes, under emulator jitter and several seeds.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_fast
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
EMU_SEED=1 "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
for seed in 1 7 99; do
  for mode in expandable caching; do
    EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode "$prog" pool > "$tmp/$mode.$seed" 2> "$tmp/$mode.$seed.err" \
      || { echo "FAIL: $mode run (seed $seed):"; cat "$tmp/$mode.$seed" "$tmp/$mode.$seed.err"; fail=1; continue; }
    diff "$tmp/plain" "$tmp/$mode.$seed" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$tmp/$mode.$seed" | head; fail=1; }
  done
done
[ $fail = 0 ] && echo "devmem fast path ok"
exit $fail
