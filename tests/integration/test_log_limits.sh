#!/usr/bin/env bash
# The event log at its limits, with test_log_limits (a tight loop of
# allocations, copies, GEMMs and all-reduces):
#  - TRAINSHIM_LOG=/dev/null turns the log off: no warning, no /dev/null.1;
#    another character device (/dev/full) is refused with one warning;
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
