#!/usr/bin/env bash
# The report's OFFLOAD section (tools/report/report_offload.c) from real runs:
#   - mlp_train on a 28 MiB device with TRAINSHIM_OFFLOAD=on: host-backed
#     memory and the pages backed at an out-of-memory, with the advice line;
#   - a pause and resume of 64 MiB (test_offload_pause): both listed with
#     their bytes, nothing failed;
#   - the same with a page move failing (an injected cuMemMap error): one
#     failed move counted;
#   - a run without offload: no OFFLOAD section.
set -u
B=${B:-build}
bin=$PWD/$B/workloads/mlp_train
prog=$PWD/$B/tests/integration/test_offload_pause
shim=$PWD/$B/libtrainshim.so
ts=$PWD/$B/trainshim
for f in "$bin" "$prog" "$shim" "$ts"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
expect() {   # report file, pattern, what
  grep -q -- "$2" "$1" || { echo "FAIL: $3: no line matching '$2' in:"; sed -n '/== OFFLOAD/,/^$/p' "$1"; fail=1; }
}
EMU_DEVICE_MEMORY=28M TRAINSHIM_OFFLOAD=on TRAINSHIM_LOG="$tmp/oom.log" LD_PRELOAD="$shim" "$bin" 2 16384 > /dev/null 2>&1 ||
  { echo "FAIL: mlp_train with offload"; fail=1; }
"$ts" report "$tmp/oom.log" > "$tmp/oom.txt" 2>&1
expect "$tmp/oom.txt" '^== OFFLOAD ==' oom
expect "$tmp/oom.txt" 'peak host-backed memory [1-9][0-9.]* MiB' oom
expect "$tmp/oom.txt" '; [1-9][0-9]* pages backed by the host at an out-of-memory' oom
expect "$tmp/oom.txt" 'advice: up to [1-9][0-9.]* MiB of this job' oom
run_pause() {   # name, fault spec
  env -u TEST_OFFLOAD_REEXEC TRAINSHIM_OFFLOAD=on EMU_DEVICE_MEMORY=4G TRAINSHIM_LOG="$tmp/$1.log" LD_PRELOAD="$shim" \
    "$prog" "fault=$2" > "$tmp/$1.out" 2>&1 || { echo "FAIL: $1 run:"; cat "$tmp/$1.out"; fail=1; }
  "$ts" report "$tmp/$1.log" > "$tmp/$1.txt" 2>&1
}
run_pause pause cuMemCreate:100000:CUDA_ERROR_UNKNOWN
expect "$tmp/pause.txt" '^  pause  tag 1 *64.00 MiB in' pause
expect "$tmp/pause.txt" '^  resume tag 1 *64.00 MiB in' pause
expect "$tmp/pause.txt" 'failed moves (rolled back) 0' pause
run_pause failed cuMemMap:2:CUDA_ERROR_UNKNOWN
expect "$tmp/failed.txt" 'failed moves (rolled back) 1' failed
TRAINSHIM_LOG="$tmp/plain.log" LD_PRELOAD="$shim" "$bin" 2 256 > /dev/null 2>&1 || { echo "FAIL: plain mlp_train"; fail=1; }
"$ts" report "$tmp/plain.log" > "$tmp/plain.txt" 2>&1
! grep -q '== OFFLOAD' "$tmp/plain.txt" || { echo "FAIL: an OFFLOAD section without offload"; fail=1; }
[ $fail = 0 ] && echo "offload report ok"
exit $fail
