#!/usr/bin/env bash
# One-row 2D copies (cudaMemcpy2D/2DAsync, cuMemcpy2D/2DAsync with zero and
# wide pitches, cublasSetVector/GetVector): under the shim every pageable
# byte goes through pinned staging (the emulator's pageable counters stay 0)
# and the data round-trips, under jitter with two seeds.
set -u
B=${B:-build}
prog=$B/tests/integration/test_copy_one_row
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export TRAINSHIM_LOG="$tmp/trainshim.%p.log" EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
"$prog" > "$tmp/plain" 2>&1 || { echo "FAIL: plain run:"; cat "$tmp/plain"; fail=1; }
for seed in 1 4; do
  EMU_SEED=$seed LD_PRELOAD="$shim" "$prog" shim > "$tmp/out" 2>&1 || { echo "FAIL: seed $seed:"; cat "$tmp/out"; fail=1; }
done
[ $fail = 0 ] && echo "one-row copies converted"
exit $fail
