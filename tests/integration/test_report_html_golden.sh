#!/usr/bin/env bash
# Golden test of the HTML report's embedded data: the JSON block of the page
# (<script type="application/json" id="trainshim-data">) for the golden logs
# must equal the committed tests/golden/report_html_*.json, and its series
# must add up to `trainshim report --format json` of the same logs, the
# memory series equal a replay of each log's records in Python
# (tests/integration/report_html_check.py consistent).
#   UPDATE_GOLDEN=1 bash tests/integration/test_report_html_golden.sh
# regenerates the committed files (review the diff!).
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
G=tests/golden
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
CHECK=tests/integration/report_html_check.py
# name | logs
CASES=(
  "rank0|$G/rank0.tslog"
  "ranks|$G/rank0.tslog $G/rank1.tslog"
  "truncated|$G/truncated.tslog"
  "gpu|$G/gpu.tslog"
  "gpu_gemm|$G/gpu_gemm.tslog"
)
for c in "${CASES[@]}"; do
  name=${c%%|*} logs=${c#*|}
  # shellcheck disable=SC2086
  "$B/trainshim" report --html "$T/$name.html" $logs 2> "$T/$name.err" || { bad "$name: $(cat "$T/$name.err")"; continue; }
  python3 "$CHECK" data "$T/$name.html" > "$T/$name.json" || { bad "$name: no data block"; continue; }
  [ "${UPDATE_GOLDEN:-0}" = 1 ] && cp "$T/$name.json" "$G/report_html_$name.json"
  diff -u "$G/report_html_$name.json" "$T/$name.json" > "$T/$name.diff" ||
    { bad "$name: the page's data differs from $G/report_html_$name.json:"; head -40 "$T/$name.diff"; }
  # shellcheck disable=SC2086
  "$B/trainshim" report --format json $logs > "$T/$name.report.json" 2> /dev/null
  python3 "$CHECK" consistent "$T/$name.html" "$T/$name.report.json" || bad "$name: series and report disagree (above)"
done
[ $fail = 0 ] && echo "ok"
exit $fail
