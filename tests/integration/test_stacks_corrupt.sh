#!/usr/bin/env bash
# The stack records' reader (tools/report/report_sites.c) and the exports on damaged
# logs: a log with stacks cut at many offsets and with bytes flipped is
# reported and exported without crashing (exit 0, or 1 with a message for a
# file that is not a log), and a cut log still names the sites it holds.
set -u
B=${B:-build}
prog=$B/tests/integration/test_stacks_symbols
tool=$B/trainshim
case $B in /*) shim=$B/libtrainshim.so ;; *) shim=$PWD/$B/libtrainshim.so ;; esac
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
TS_STACKS_CHILD=1 TRAINSHIM_STACKS=16 TRAINSHIM_LOG="$tmp/run.log" LD_PRELOAD="$shim" "$prog" \
  || { echo "FAIL: workload under the shim failed"; exit 1; }
size=$(stat -c %s "$tmp/run.log")
fail=0
try() {  # try <file> <what>
  local rc
  for cmd in "report $1" "report --format json $1" "export --type chrome-trace $1 -o $tmp/o.json" \
             "export --type memory-snapshot $1 -o $tmp/o.pickle" "export --type svg $1 -o $tmp/o.svg"; do
    "$tool" $cmd > "$tmp/out" 2> "$tmp/err"; rc=$?
    if [ $rc -gt 1 ]; then echo "FAIL: trainshim $cmd ($2) exited $rc:"; tail -5 "$tmp/err"; fail=1; return; fi
  done
}
# cuts: 8 offsets spread over the file (an odd stride, so record
# boundaries and middles are both hit), plus the last bytes
step=$(( size / 8 | 1 ))
for ((off = 0; off < size; off += step)); do
  head -c "$off" "$tmp/run.log" > "$tmp/cut.log"; try "$tmp/cut.log" "cut at $off"
done
for off in $((size - 1)) $((size - 8)) $((size - 41)); do
  head -c "$off" "$tmp/run.log" > "$tmp/cut.log"; try "$tmp/cut.log" "cut at $off"
done
# flips: one byte at a time, spread over the file
for ((i = 0; i < 8; i++)); do
  off=$(( (i * 7919) % size ))
  cp "$tmp/run.log" "$tmp/flip.log"
  printf "\\x$(printf %02x $(( (i * 37 + 1) % 256 )))" | dd of="$tmp/flip.log" bs=1 seek="$off" conv=notrunc status=none
  try "$tmp/flip.log" "byte $off flipped"
done
# a log cut just before its end record still has every site
head -c $((size - 40)) "$tmp/run.log" > "$tmp/cut.log"
"$tool" report "$tmp/cut.log" 2>/dev/null | grep -q "^      alloc_activations (" \
  || { echo "FAIL: the cut log lost its sites"; fail=1; }
[ $fail = 0 ] && echo "ok: damaged logs with stacks are reported and exported without crashing"
exit $fail
