#!/usr/bin/env bash
# The HTML report in a real browser: the demo's training job (two ranks
# through mpirun when it is installed, CUPTI and stacks on) writes its page
# (scripts/demo.sh), headless Chromium renders it, and
# tests/integration/report_html_check.py demands no console message, every
# section's figures read back from the DOM equal to `trainshim report
# --format json` of the same logs, series that add up to the report's
# totals (memory: equal to a replay of the log's records in Python), and a
# screenshot that is not blank.  A log without GEMM, NCCL and
# CUPTI records still gets every section, each saying what is absent.  Runs
# with memory offload show its OFFLOAD figures equal to the text report's.
# Hovering a moment of the memory chart shows a tip and clicking it lists that
# moment's largest live blocks.  The golden rank0 log's failed allocation
# and a pool's refused request show as OOM points.  Also: the
# checker sees a page's console errors (a page that throws), and
# `trainshim run --html`, a bad --html path.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
CHECK=tests/integration/report_html_check.py
command -v "${CHROMIUM:-chromium}" > /dev/null || { echo "FAIL: chromium not installed (scripts/setup.sh installs it)"; exit 1; }
[ -x "$B/trainshim" ] && [ -x "$B/workloads/mlp_train" ] || { echo "FAIL: $B not built"; exit 1; }

# the checker itself: a page that logs and throws is caught
printf '<html><body><script>console.log("x"); null.y;</script></body></html>\n' > "$T/throws.html"
python3 "$CHECK" console "$T/throws.html" > "$T/throws.txt" && grep -q 'Uncaught TypeError' "$T/throws.txt" ||
  bad "the console check does not see a page's error: $(cat "$T/throws.txt")"

DEMO_LOGDIR=$T/demo DEMO_STEPS=12 B=$B bash scripts/demo.sh > "$T/demo.out" 2>&1 || { cat "$T/demo.out"; bad "demo failed"; }
page=$T/demo/report.html
[ -s "$page" ] || bad "the demo wrote no $page"
"$B/trainshim" report --format json "$T"/demo/trainshim.r*.log > "$T/report.json" 2> /dev/null || bad "JSON report failed"
mkdir -p "$T/shot"
python3 "$CHECK" demo "$page" "$T/report.json" "$T/shot" || bad "the demo's page (above)"
size=$(stat -c %s "$page")
[ "$size" -lt $((5 << 20)) ] || bad "the demo's page is $size bytes"
grep -q -E '(src|href)="https?:' "$page" && bad "the page fetches from the network"

# a log without GEMM, NCCL or CUPTI records: every section, absent ones say so
"$B/trainshim" report --html "$T/rank0.html" tests/golden/rank0.tslog 2> /dev/null || bad "report --html rank0"
mkdir -p "$T/shot0"
python3 "$CHECK" absent "$T/rank0.html" "$T/shot0" || bad "the page of a log without accounting records (above)"

# a pool that refused a request (tests/integration/test_devmem_report.c): the
# OOM point carries the pool's figures, the chart its reserved peak
prog=$PWD/$B/tests/integration/test_devmem_report
[ -x "$prog" ] || bad "$prog not built"
EMU_DEVICE_MEMORY=256MiB TRAINSHIM_LOG="$T/oom.log" LD_PRELOAD="$PWD/$B/libtrainshim.so" \
  LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$prog" > /dev/null 2>&1 || bad "the OOM program failed"
"$B/trainshim" report --html "$T/oom.html" "$T/oom.log" 2> /dev/null &&
  "$B/trainshim" report --format json "$T/oom.log" > "$T/oom.json" 2> /dev/null || bad "report of the OOM run"
mkdir -p "$T/shot2"
python3 "$CHECK" pool "$T/oom.html" "$T/oom.json" "$T/shot2" || bad "the page of a pool OOM (above)"

# two devices (tests/integration/test_devmem_peer.c): one memory chart each,
# every bucket's highest point equal to a replay of the log in Python
prog=$PWD/$B/tests/integration/test_devmem_peer
EMU_DEVICES=2 TRAINSHIM_LOG="$T/peer.log" LD_PRELOAD="$PWD/$B/libtrainshim.so" \
  LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$prog" > /dev/null 2>&1 || bad "the two-device program failed"
"$B/trainshim" report --html "$T/peer.html" "$T/peer.log" 2> /dev/null &&
  "$B/trainshim" report --format json "$T/peer.log" > "$T/peer.json" 2> /dev/null || bad "report of the two-device run"
python3 "$CHECK" consistent "$T/peer.html" "$T/peer.json" || bad "the two-device page's data (above)"
python3 "$CHECK" data "$T/peer.html" | python3 -c 'import json, sys; d = json.load(sys.stdin)
sys.exit([v["device"] for v in d["logs"][0]["memory_series"]["devices"]] != [0, 1])' || bad "the two-device page has not two memory charts"

# memory offload (as tests/integration/test_offload_report.sh runs it):
# mlp_train on a 28 MiB device backed by the host, and a pause and resume
# of 64 MiB; the OFFLOAD section's figures equal the text report's
emu_lib="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EMU_DEVICE_MEMORY=28M TRAINSHIM_OFFLOAD=on TRAINSHIM_LOG="$T/offload.log" LD_PRELOAD="$PWD/$B/libtrainshim.so" \
  LD_LIBRARY_PATH="$emu_lib" "$B/workloads/mlp_train" 2 16384 > /dev/null 2>&1 || bad "mlp_train with offload failed"
env -u TEST_OFFLOAD_REEXEC TRAINSHIM_OFFLOAD=on EMU_DEVICE_MEMORY=4G TRAINSHIM_LOG="$T/pause.log" \
  LD_PRELOAD="$PWD/$B/libtrainshim.so" LD_LIBRARY_PATH="$emu_lib" "$B/tests/integration/test_offload_pause" \
  fault=cuMemCreate:100000:CUDA_ERROR_UNKNOWN > /dev/null 2>&1 || bad "the pause program failed"
for o in offload pause; do
  "$B/trainshim" report --html "$T/$o.html" "$T/$o.log" 2> /dev/null &&
    "$B/trainshim" report "$T/$o.log" > "$T/$o.txt" 2> /dev/null || bad "report of the $o run"
  mkdir -p "$T/shot-$o"
  python3 "$CHECK" offload "$T/$o.html" "$T/$o.txt" "$T/shot-$o" || bad "the OFFLOAD section of the $o run (above)"
done
grep -q 'advice: up to [1-9]' "$T/offload.txt" || bad "the offload run has no OFFLOAD advice line"
grep -q '^  pause  tag 1 *64.00 MiB' "$T/pause.txt" || bad "the pause run lists no pause"

# trainshim run --html: the page of the run's own log
LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$B/trainshim" run --log "$T/run.%p.log" \
  --html "$T/run.html" -- "$B/workloads/mlp_train" 3 128 > /dev/null 2> "$T/run.err" || bad "run --html: $(cat "$T/run.err")"
python3 "$CHECK" data "$T/run.html" > "$T/run.json" 2> /dev/null &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["logs"][0]["run"]["log"].startswith(sys.argv[2]), d["logs"][0]["run"]["log"]' \
    "$T/run.json" "$T/run." || bad "run --html wrote no page of its log"

# a page that cannot be written: one error line, exit 1
"$B/trainshim" report --html "$T/no/such/dir/x.html" tests/golden/rank0.tslog > /dev/null 2> "$T/err"; rc=$?
[ $rc = 1 ] && [ "$(grep -c 'trainshim: error: --html' "$T/err")" = 1 ] || bad "unwritable page: exit $rc, '$(cat "$T/err")'"

[ $fail = 0 ] && echo "ok"
exit $fail
