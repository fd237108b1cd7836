#!/usr/bin/env bash
# test_devmem_capture without and with trainshim's device allocator (both
# modes), under emulator jitter and two seeds: identical status codes and
# graph replay results (graph allocations pass through, no event is recorded
# on a capturing stream, a synchronous cudaMalloc inside a global capture gets
# the real refusal).
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_capture
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
"$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
for seed in 1 3; do
  for mode in expandable caching; do
    EMU_SEED=$seed TRAINSHIM_ALLOC=$mode LD_PRELOAD="$shim" "$prog" > "$tmp/$mode.$seed" 2> "$tmp/$mode.$seed.err" \
      || { echo "FAIL: $mode run (seed $seed):"; cat "$tmp/$mode.$seed" "$tmp/$mode.$seed.err"; fail=1; continue; }
    diff "$tmp/plain" "$tmp/$mode.$seed" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$tmp/$mode.$seed"; fail=1; }
  done
done
[ $fail = 0 ] && echo "devmem capture ok"
exit $fail
