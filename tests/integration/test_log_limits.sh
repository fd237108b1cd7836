#!/usr/bin/env bash
# The event log at its limits, with test_log_limits (a tight loop of
# allocations, copies, GEMMs and all-reduces):
#  - TRAINSHIM_LOG=/dev/null turns the log off: no warning, no /dev/null.1;
#    another character device (/dev/full) is refused with one warning;
#  - TRAINSHIM_LOG_MAX=200K: the log stays under the cap plus a bounded tail
#    (the per-site totals), the report says events were aggregated, and its
#    totals (allocation calls, bytes, peak, live at end, size histogram, copy
#    calls and bytes, GEMM FLOPs, NCCL calls and bytes, errors) equal those
#    of the same run without a cap, which equal the program's own count;
#  - a disk that fills mid-run (a 256 KiB tmpfs): the program runs on with
#    the same output, one warning is printed, and the log stays readable to
#    its end record, which counts the events that were not logged.
set -u
B=${B:-build}
prog=$PWD/$B/tests/integration/test_log_limits
shim=$PWD/$B/libtrainshim.so
tool=$PWD/$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d)
cleanup() { umount "$tmp/small" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
"$prog" 3000 > "$tmp/plain" 2>&1 || { echo "FAIL: program failed without the shim"; cat "$tmp/plain"; exit 1; }

# ---- character devices as the log path
for dev in /dev/null /dev/full; do
  had=0; [ -e "$dev.1" ] && had=1
  TRAINSHIM_LOG=$dev LD_PRELOAD="$shim" "$prog" 200 > "$tmp/dev.out" 2> "$tmp/dev.err" \
    || { echo "FAIL: $dev: program failed"; cat "$tmp/dev.err"; fail=1; }
  if [ $had = 0 ] && [ -e "$dev.1" ]; then echo "FAIL: TRAINSHIM_LOG=$dev created $dev.1"; rm -f "$dev.1"; fail=1; fi
  warns=$(grep -c "trainshim: warning" "$tmp/dev.err")
  if [ $dev = /dev/null ]; then
    [ "$warns" = 0 ] || { echo "FAIL: /dev/null: warnings"; cat "$tmp/dev.err"; fail=1; }
  else
    [ "$warns" = 1 ] && grep -q "is a device, FIFO or socket, not a file; no event log" "$tmp/dev.err" \
      || { echo "FAIL: $dev: want one refusal warning"; cat "$tmp/dev.err"; fail=1; }
  fi
done

# ---- the size cap
cap=$((200 * 1024))
TRAINSHIM_LOG="$tmp/uncapped.log" LD_PRELOAD="$shim" "$prog" 3000 > "$tmp/uncapped.out" 2>&1 || { echo "FAIL: uncapped run"; fail=1; }
TRAINSHIM_LOG="$tmp/capped.log" TRAINSHIM_LOG_MAX=200K LD_PRELOAD="$shim" "$prog" 3000 > "$tmp/capped.out" 2> "$tmp/capped.err" \
  || { echo "FAIL: capped run"; cat "$tmp/capped.err"; fail=1; }
cmp -s "$tmp/plain" "$tmp/capped.out" || { echo "FAIL: output differs under the cap"; fail=1; }
[ -s "$tmp/capped.err" ] && { echo "FAIL: the capped run printed:"; cat "$tmp/capped.err"; fail=1; }
for l in uncapped capped; do
  "$tool" report --format json "$tmp/$l.log" > "$tmp/$l.json" || { echo "FAIL: report of the $l log"; fail=1; }
done
"$tool" report "$tmp/capped.log" > "$tmp/capped.txt" || fail=1
grep -q "^log cap       200.00 KiB (TRAINSHIM_LOG_MAX) reached: [0-9]* later events were aggregated" "$tmp/capped.txt" \
  || { echo "FAIL: the text report does not say the log was capped"; fail=1; }
python3 - "$tmp/uncapped.json" "$tmp/capped.json" "$tmp/capped.log" "$tmp/uncapped.log" "$cap" "$tmp/plain" <<'PY' || fail=1
import json, os, sys
full, capd = (json.load(open(p)) for p in sys.argv[1:3])
size, full_size, cap = os.path.getsize(sys.argv[3]), os.path.getsize(sys.argv[4]), int(sys.argv[5])
w = open(sys.argv[6]).read().split()
k = dict(zip(w[0::2], map(int, w[1::2])))
bad = []
# the tail past the cap: at most one writer chunk still being cut, the
# per-site totals and the end record
if full_size < 4 * cap: bad.append(f"the uncapped log ({full_size} B) is too small to test a {cap} B cap")
if size > cap + 64 * 1024: bad.append(f"capped log {size} B, cap {cap} B")
run = capd["run"]
if run["status"] != "complete": bad.append(f"capped log status {run['status']}: {run['note']}")
if run["log_cap_bytes"] != cap or not run["records_aggregated"] > 1000: bad.append(f"run {run}")
if full["run"]["records_aggregated"] != 0: bad.append("the uncapped log says it was aggregated")
mem = ["peak_allocated_bytes", "alloc_calls", "alloc_failed", "alloc_requested_bytes", "free_calls", "free_failed",
       "live_at_end_blocks", "live_at_end_bytes", "size_histogram"]
for key in mem:
    if capd["memory"][key] != full["memory"][key]: bad.append(f"memory {key}: {capd['memory'][key]} capped, {full['memory'][key]} uncapped")
for key, v in full["copies"].items():
    if key != "host_time_ns" and capd["copies"][key] != v: bad.append(f"copies {key}: {capd['copies'][key]} capped, {v} uncapped")
if capd["errors"] != full["errors"]: bad.append(f"errors differ: {capd['errors']} / {full['errors']}")
for key in ("gemm_calls", "gemm_flops"):
    a, b = capd["compute"].get(key), full["compute"].get(key)
    if a != b: bad.append(f"compute {key}: {a} capped, {b} uncapped")
ops = lambda r: [(o["op"], o["calls"], o["failed_calls"], o["bytes"], o["algo_bytes"]) for o in r["nccl"]["ops"]]
if ops(capd) != ops(full): bad.append(f"nccl ops {ops(capd)} / {ops(full)}")
rows = lambda r: [(c["size"], c["rank"], c["calls"], c["bytes"]) for c in r["nccl"]["communicators"]]
if rows(capd) != rows(full): bad.append(f"communicator rows {rows(capd)} / {rows(full)}")
# and both are the program's own figures
if full["memory"]["alloc_calls"] < k["allocs"] or full["copies"]["h2d_bytes"] != k["copy_bytes"]: bad.append(f"uncapped memory/copies vs program {k}")
if full["compute"]["gemm_flops"] != k["flops"] or ops(full)[0][3] != k["nccl_bytes"]: bad.append(f"uncapped FLOPs/NCCL bytes vs program {k}")
for b in bad: print("FAIL: log cap:", b)
print(f"log cap: {size} B capped ({run['records_aggregated']} events aggregated), {full_size} B uncapped")
sys.exit(1 if bad else 0)
PY

# ---- a disk that fills mid-run
mkdir "$tmp/small"
mounted=0
if mount -t tmpfs -o size=256k tmpfs "$tmp/small" 2>/dev/null; then mounted=1; fi
if [ $mounted = 1 ]; then
  TRAINSHIM_LOG="$tmp/small/run.log" LD_PRELOAD="$shim" "$prog" 3000 > "$tmp/full.out" 2> "$tmp/full.err" \
    || { echo "FAIL: the program failed when the disk filled"; cat "$tmp/full.err"; fail=1; }
  cmp -s "$tmp/plain" "$tmp/full.out" || { echo "FAIL: output differs when the disk filled"; fail=1; }
  n=$(grep -c "trainshim: warning: cannot write event log" "$tmp/full.err")
  [ "$n" = 1 ] || { echo "FAIL: $n disk-full warnings, want 1"; cat "$tmp/full.err"; fail=1; }
  grep -q "No space left on device" "$tmp/full.err" || { echo "FAIL: the warning does not say why"; fail=1; }
  "$tool" report --format json "$tmp/small/run.log" > "$tmp/full.json" 2> "$tmp/full.rerr" \
    || { echo "FAIL: report of the cut log failed"; cat "$tmp/full.rerr"; fail=1; }
  "$tool" report "$tmp/small/run.log" > "$tmp/full.txt" 2>/dev/null
  python3 - "$tmp/full.json" <<'PY' || fail=1
import json, sys
run = json.load(open(sys.argv[1]))["run"]
bad = []
if run["status"] != "complete": bad.append(f"status {run['status']} ({run['note']}): the end record should fit the room kept for it")
if not run["records_dropped"] > 1000: bad.append(f"records_dropped {run['records_dropped']}")
for b in bad: print("FAIL: disk full:", b)
print(f"disk full: {run['records']} records logged, {run['records_dropped']} dropped")
sys.exit(1 if bad else 0)
PY
  grep -Eq "^dropped +[0-9]+ events not logged" "$tmp/full.txt" || { echo "FAIL: the text report does not say what was dropped"; fail=1; }
  umount "$tmp/small"
else
  echo "FAIL: cannot mount a small tmpfs to fill (needs root)"; fail=1
fi
[ $fail = 0 ] && echo "ok: /dev/null off, /dev/full refused, full disk: one warning, dropped records counted"
exit $fail
