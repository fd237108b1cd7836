#!/usr/bin/env bash
# The HTML report on a million-event log (tests/bench/gen_big_log.c): the
# page's size, the time `trainshim report --html` takes to write it beside
# the text report's on the same log, and the time headless Chromium takes
# from navigation to the load event beside the text report shown as a page
# (<pre>) of the same log.  Targets: under 5 MiB, under 2 s to open.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
EVENTS=${BENCH_HTML_EVENTS:-1000000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CHECK=tests/integration/report_html_check.py
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -Ishim -o "$T/gen" tests/bench/gen_big_log.c || exit 1
n=$("$T/gen" "$T/big.log" "$EVENTS") || exit 1
# "wall s (cpu s)": the machine may be shared, the CPU time says what the command itself cost
secs() {
  local TIMEFORMAT='%R %U %S' t
  t=$( { time "$@" > /dev/null 2>&1; } 2>&1) || return 1
  echo "$t" | awk '{ printf "%.3f s (cpu %.3f s)", $1, $2 + $3 }'
}
text_s=$(secs "$B/trainshim" report "$T/big.log") || { echo "text report failed"; exit 1; }
html_s=$(secs "$B/trainshim" report --html "$T/big.html" "$T/big.log") || { echo "html report failed"; exit 1; }
"$B/trainshim" report "$T/big.log" 2> /dev/null |
  python3 -c 'import html, sys; print("<!DOCTYPE html><html><body><pre>" + html.escape(sys.stdin.read()) + "</pre></body></html>")' > "$T/text.html"
log_mib=$(awk -v b="$(stat -c %s "$T/big.log")" 'BEGIN { printf "%.1f", b / 1048576 }')
page_mib=$(awk -v b="$(stat -c %s "$T/big.html")" 'BEGIN { printf "%.2f", b / 1048576 }')
echo "log: $n records, $log_mib MiB"
echo "html page: $page_mib MiB (target < 5 MiB)"
echo "write: html $html_s, baseline text report $text_s (same log)"
if command -v "${CHROMIUM:-chromium}" > /dev/null; then
  load=$(python3 "$CHECK" loadms "$T/big.html") || { echo "chromium load failed"; exit 1; }
  base=$(python3 "$CHECK" loadms "$T/text.html") || exit 1
  echo "headless chromium, navigation to load event: html page $load ms (target < 2000 ms), baseline text report as a page $base ms"
else
  echo "headless chromium: not installed (scripts/setup.sh installs it): load time not measured"
fi
