#!/usr/bin/env bash
# The pinned copy engine's log records reach `trainshim report`: after a run
# whose pageable copies above the threshold were all converted, the JSON
# report's copies.converted_bytes equals the bytes copied both ways and
# copies.host_blocked_ns is the host time in copies; the text report has the
# "converted to pinned" line.  With conversion off the keys are absent.
set -u
B=${B:-build}
prog=$B/tests/integration/test_copy_semantics
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
TRAINSHIM_LOG="$tmp/on.log" LD_PRELOAD="$shim" "$prog" counters > "$tmp/on.out" 2> "$tmp/on.err" \
  || { echo "FAIL: run failed:"; cat "$tmp/on.out" "$tmp/on.err"; exit 1; }
total=$(awk '/^total/ { print $2 }' "$tmp/on.err")
"$tool" report --format json "$tmp/on.log" > "$tmp/on.json" || { echo "FAIL: report failed"; exit 1; }
python3 - "$tmp/on.json" "$total" <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))["copies"]
total = int(sys.argv[2])
ok = True
if c.get("converted_bytes") != 2 * total:
    print(f"FAIL: copies.converted_bytes = {c.get('converted_bytes')}, want {2 * total}"); ok = False
if c.get("converted_calls") != c["h2d_calls"] + c["d2h_calls"]:
    print(f"FAIL: copies.converted_calls = {c.get('converted_calls')}, want every H2D/D2H call"); ok = False
if not c.get("host_blocked_ns") or c["host_blocked_ns"] != c["host_time_ns"]:
    print(f"FAIL: copies.host_blocked_ns = {c.get('host_blocked_ns')}, want host_time_ns {c['host_time_ns']}"); ok = False
sys.exit(0 if ok else 1)
PY
"$tool" report "$tmp/on.log" | grep -q "^converted to pinned" || { echo "FAIL: no 'converted to pinned' line in the text report"; fail=1; }
TRAINSHIM_LOG="$tmp/off.log" TRAINSHIM_PINNED_COPY=off LD_PRELOAD="$shim" "$prog" counters > /dev/null 2>&1 || { echo "FAIL: run with conversion off failed"; fail=1; }
"$tool" report --format json "$tmp/off.log" | grep -q converted_bytes && { echo "FAIL: converted_bytes reported with conversion off"; fail=1; }
[ $fail = 0 ] && echo "ok: report shows $((2 * total)) converted bytes"
exit $fail
