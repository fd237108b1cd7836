#!/usr/bin/env bash
# `trainshim report` and `export` stream the log: memory is bounded by its
# valid content, and reading stops at the first invalid record.  /dev/zero
# (endless, not a log) must end at once with a clear error, and a real log
# followed by a 1 GiB zero tail (a sparse file: no disk used) must be read
# up to its last record without reading the tail: both run under a virtual
# memory limit far below the tail's size, and the tail's peak resident size
# is checked against the log's own.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
G=tests/golden
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
LIMIT_KB=393216 # 384 MiB of address space: the old reader needed over 1 GiB here

# timeout only stops a hang from blocking the suite; nothing is timed
limited() { (ulimit -v $LIMIT_KB; exec timeout 120 "$@"); }

limited "$B/trainshim" report /dev/zero > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 1 ] || bad "report /dev/zero: exit $rc, want 1 ($(head -c 300 "$T/err"))"
grep -q "/dev/zero: not a trainshim log (bad magic at offset 0)" "$T/err" ||
  bad "report /dev/zero: no clear error: $(head -c 300 "$T/err")"

log=$G/rank0.tslog
size=$(stat -c %s "$log")
cp "$log" "$T/tail.tslog"
truncate -s +1G "$T/tail.tslog"
for fmt in text json; do
  limited "$B/trainshim" report --format $fmt "$T/tail.tslog" > "$T/tail.$fmt" 2> "$T/tail.err"; rc=$?
  [ $rc = 0 ] || bad "report --format $fmt of a log with a zero tail: exit $rc ($(head -c 300 "$T/tail.err"))"
  grep -q "warning: $T/tail.tslog: corrupt record at offset $size: invalid length 0" "$T/tail.err" ||
    bad "zero tail ($fmt): no 'readable up to' warning at offset $size: $(head -c 300 "$T/tail.err")"
done
# everything before the tail reads as the log alone does
"$B/trainshim" report --format json "$log" > "$T/alone.json" 2>/dev/null
python3 - "$T/alone.json" "$T/tail.json" "$size" <<'PY' || fail=1
import json, sys
a, t, size = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
bad = []
if t["run"]["stopped_at_offset"] != size or not t["run"]["truncated"]:
    bad.append(f"stopped at {t['run']['stopped_at_offset']}, truncated {t['run']['truncated']}; want {size}")
for k in ("memory", "copies", "errors"):
    if a[k] != t[k]:
        bad.append(f"{k} differs from the log read alone")
for b in bad:
    print("FAIL: zero tail:", b)
sys.exit(1 if bad else 0)
PY
limited "$B/trainshim" export --type chrome-trace "$T/tail.tslog" -o "$T/tail.trace" 2> "$T/exp.err" ||
  bad "export of a log with a zero tail failed: $(head -c 300 "$T/exp.err")"

# peak resident size: the tail must not be held (where GNU time is installed)
if [ -x /usr/bin/time ]; then
  rss() { /usr/bin/time -f %M "$B/trainshim" report "$1" 2>&1 >/dev/null | tail -1; }
  alone=$(rss "$log"); tail=$(rss "$T/tail.tslog")
  [ "$tail" -lt $((alone + 65536)) ] ||
    bad "peak RSS with a 1 GiB zero tail is ${tail} KiB against ${alone} KiB for the log alone"
fi

# a pipe streams too: the same report as the file
"$B/trainshim" report - < "$log" > "$T/pipe.txt" 2>/dev/null || bad "report - (standard input) failed"
"$B/trainshim" report "$log" > "$T/file.txt" 2>/dev/null
diff <(tail -n +3 "$T/pipe.txt") <(tail -n +3 "$T/file.txt") > /dev/null ||
  bad "report of standard input differs from the file's (beyond the log name)"

[ $fail = 0 ] && echo "ok: /dev/zero refused at once; a 1 GiB zero tail not read; pipes streamed"
exit $fail
