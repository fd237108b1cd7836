#!/usr/bin/env bash
# test_devmem_capture_count under trainshim's device allocator (both pool
# modes, two seeds): the shim counts every capture begin and end, asks
# cuStreamIsCapturing on the allocation path only while one is in progress,
# and warns once, at the end of the program, about the one capture it could
# not see (begun through the CUDA 10.0 ABI's cuStreamBeginCapture).
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_capture_count
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
for seed in 1 5; do
  for mode in expandable caching; do
    out=$tmp/$mode.$seed
    if ! EMU_SEED=$seed TRAINSHIM_ALLOC=$mode LD_PRELOAD="$shim" "$prog" > "$out" 2> "$out.err"; then
      echo "FAIL: $mode (seed $seed):"; cat "$out" "$out.err"; fail=1; continue
    fi
    n=$(grep -c "stream capture began where trainshim could not see it" "$out.err")
    [ "$n" = 1 ] || { echo "FAIL: $mode (seed $seed): $n warnings about unseen captures, want 1:"; cat "$out.err"; fail=1; }
  done
done
[ $fail = 0 ] && echo "devmem capture counting ok"
exit $fail
