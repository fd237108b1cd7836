#!/usr/bin/env bash
# test_devmem_streams under trainshim's device allocator: a slow kernel still
# reading a freed block while another stream allocates and overwrites gives
# the same (exact) sums as without the shim, in the expandable and caching
# modes, under emulator jitter and several seeds; in the pool, a
# cudaFreeAsync block is reused at once on its own stream.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_streams
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
EMU_SEED=1 "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
for seed in 1 7 99; do
  for mode in expandable caching; do
    EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode "$prog" pool > "$tmp/$mode.$seed" 2> "$tmp/$mode.$seed.err" \
      || { echo "FAIL: $mode run (seed $seed):"; cat "$tmp/$mode.$seed" "$tmp/$mode.$seed.err"; fail=1; continue; }
    diff "$tmp/plain" "$tmp/$mode.$seed" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$tmp/$mode.$seed" | head; fail=1; }
  done
done
[ $fail = 0 ] && echo "devmem streams ok: $(cat "$tmp/expandable.1.err")"
exit $fail
