#!/usr/bin/env bash
# The copy engine follows its piece plan: test_copy_pieces counts the
# driver copies each converted cudaMemcpy/cudaMemcpyAsync makes (emulator
# call counters) against the plan's piece count, at the default largest
# piece and at 1 MiB and 64 KiB, under jitter; without the shim the same
# program checks its data only.
set -u
B=${B:-build}
prog=$B/tests/integration/test_copy_pieces
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export TRAINSHIM_LOG="$tmp/trainshim.%p.log" EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
"$prog" plain > "$tmp/plain" 2>&1 || { echo "FAIL: plain run:"; cat "$tmp/plain"; fail=1; }
for largest in 8388608 1048576 65536; do
  env LD_PRELOAD="$shim" TRAINSHIM_COPY_CHUNK=$largest TRAINSHIM_PINNED_COPY_MIN=64KiB "$prog" $largest > "$tmp/out" 2>&1 \
    || { echo "FAIL: largest piece $largest:"; cat "$tmp/out"; fail=1; }
done
[ $fail = 0 ] && echo "ok: every converted copy cut as the plan says"
exit $fail
