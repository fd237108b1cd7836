#!/usr/bin/env bash
# test_devmem_mempool with and without the shim, in the expandable and
# caching modes: the default pool's used figures, their resets, the answers
# to bad sets and a program's own pool identical; the reserved invariants are
# checked inside the program.  A run where the shim serves nothing would not
# test it: the shim's log must show the allocations served.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_mempool
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
"$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
fail=0
for mode in expandable caching; do
  LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode TRAINSHIM_LOG="$tmp/log.$mode.%p" "$prog" > "$tmp/$mode" 2> "$tmp/$mode.err" \
    || { echo "FAIL: $mode run:"; cat "$tmp/$mode" "$tmp/$mode.err"; fail=1; continue; }
  diff "$tmp/plain" "$tmp/$mode" > /dev/null || { echo "FAIL: $mode differs:"; diff "$tmp/plain" "$tmp/$mode" | head; fail=1; }
  "$B/trainshim" report --format json "$tmp"/log.$mode.* | python3 -c '
import json, sys
m = json.load(sys.stdin)["memory"]
assert m["allocator_mode"] == sys.argv[1] and m["driver_calls"] > 0 and m["peak_allocated_bytes"] >= 40993792 - 512, m
' $mode || { echo "FAIL: $mode: the shim served nothing"; fail=1; }
done
[ $fail = 0 ] && { cat "$tmp/plain"; echo "default memory pool answered by the shim: same figures"; }
exit $fail
