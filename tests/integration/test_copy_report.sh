#!/usr/bin/env bash
# The pinned copy engine's log records reach `trainshim report`: after a run
# whose pageable copies above the threshold were all converted, the JSON
# report's copies.converted_bytes equals the bytes copied both ways and
# copies.host_blocked_ns is the host time in copies; the text report has the
# "converted to pinned" line.  With conversion off the keys are absent.
# The ADVICE line on pageable copies says what was converted and what not.
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
# ADVICE (shown for runs with GEMMs): what the engine converted and what not,
# from the records: 8 calls of 1 MiB converted, 10 of 64 KiB below the
# threshold; all converted with the threshold at 1 byte; conversion off.
advice() {  # advice <name> <env...>: the report's pageable-copy ADVICE line
  local name=$1; shift
  env "$@" TRAINSHIM_LOG="$tmp/$name.log" LD_PRELOAD="$shim" "$prog" advice > "$tmp/$name.out" 2>&1 \
    || { echo "FAIL: advice run $name failed:"; cat "$tmp/$name.out"; fail=1; }
  "$tool" report "$tmp/$name.log" | grep -i 'pageable host memory'
}
want="pageable host memory: 8.6 MiB of 8.6 MiB H2D/D2H bytes; trainshim converted 8.0 MiB (8 calls); not converted: 640.0 KiB in 10 copies below TRAINSHIM_PINNED_COPY_MIN=256.0 KiB, 0.0 KiB above it (capture/fallback): pin those"
got=$(advice adv_on)
[ "$got" = "- $want" ] || { echo "FAIL: advice with conversion on:"; echo "  got:  $got"; echo "  want: - $want"; fail=1; }
got=$(advice adv_all TRAINSHIM_PINNED_COPY_MIN=1)
case $got in *"trainshim converted all of it (18 calls, host blocked "*) ;;
  *) echo "FAIL: advice with every copy converted: $got"; fail=1;; esac
got=$(advice adv_off TRAINSHIM_PINNED_COPY=off)
case $got in *"(8.6 MiB of 8.6 MiB) used pageable host memory and TRAINSHIM_PINNED_COPY was off"*) ;;
  *) echo "FAIL: advice with conversion off: $got"; fail=1;; esac
[ $fail = 0 ] && echo "ok: report shows $((2 * total)) converted bytes; ADVICE says what was converted"
exit $fail
