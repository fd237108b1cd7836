#!/usr/bin/env bash
# Step-order placement (shim/offload/offload_step.c) and the OFFLOAD
# section's per-step figures, under emulator jitter:
#   - mlp_train (batch 16384, ~46 MiB at peak) on a 30 MiB device (1.5x
#     oversubscribed), TRAINSHIM_OFFLOAD=on, a 25 GB/s host link: every loss
#     and the weights checksum bit-identical to the run without the shim; the
#     report lists its steps, and its predicted link time is within 20% of
#     the emulator's link.host.ns (MLP_EMU_COUNTERS), and so is each step's,
#     measured from the emulator's trace of link charges (EMU_LINK_TRACE,
#     `trainshim report --link-trace`); no thrashing advice;
#     the learned order moves pages (some promoted and demoted) and moves
#     fewer bytes over the link than TRAINSHIM_OFFLOAD_STEP_ORDER=0;
#   - test_offload_step steady (a hot buffer the out-of-memory put on the
#     host, read every step through kernel arguments and copies): identical
#     checksum, the hot buffer's 4 pages promoted (and 4 cold ones demoted)
#     at one boundary, the last whole step reaches nothing on host pages
#     (with step order off it still does), and no thrashing advice;
#   - test_offload_step rotate (a different hot buffer every step: the
#     previous step never predicts the next): identical checksum and the
#     thrashing advice line with its numbers.
set -u
B=${B:-build}
mlp=$PWD/$B/workloads/mlp_train
prog=$PWD/$B/tests/integration/test_offload_step
shim=$PWD/$B/libtrainshim.so
ts=$PWD/$B/trainshim
for f in "$mlp" "$prog" "$shim" "$ts"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} EMU_HOST_LINK_GBPS=25
fail=0
steps_of() {   # report file: the OFFLOAD section's step rows
  sed -n '/^== OFFLOAD/,/^$/p' "$1" | grep -E '^ +[0-9]+\+? +[0-9]+ +[0-9]+ '
}
show() { echo "--- $1:"; sed -n '/^== OFFLOAD/,/^$/p' "$1"; }

# ---- mlp_train at 1.5x
"$mlp" 6 16384 > "$tmp/plain" || { echo "FAIL: plain mlp_train"; exit 1; }
for order in 1 0; do
  MLP_EMU_COUNTERS=1 EMU_DEVICE_MEMORY=30M TRAINSHIM_OFFLOAD=on TRAINSHIM_OFFLOAD_STEP_ORDER=$order \
    EMU_LINK_TRACE="$tmp/link$order.txt" \
    TRAINSHIM_LOG="$tmp/mlp$order.log" LD_PRELOAD="$shim" "$mlp" 6 16384 > "$tmp/mlp$order" 2> "$tmp/mlp$order.err" ||
    { echo "FAIL: mlp_train with offload (step order $order):"; tail -3 "$tmp/mlp$order.err"; fail=1; }
  cmp -s "$tmp/plain" "$tmp/mlp$order" || { echo "FAIL: mlp_train (step order $order) output differs"; diff "$tmp/plain" "$tmp/mlp$order" | head; fail=1; }
  "$ts" report --link-trace "$tmp/link$order.txt" "$tmp/mlp$order.log" > "$tmp/mlp$order.txt" 2>&1
done
rows=$(steps_of "$tmp/mlp1.txt" | wc -l)
[ "$rows" -ge 4 ] || { echo "FAIL: mlp_train: $rows step rows (want >= 4)"; show "$tmp/mlp1.txt"; fail=1; }
measured=$(awk '/^emu end/ { print $5 }' "$tmp/mlp1.err")
predicted=$(sed -n 's/.*predicted link time \([0-9.]*\) ms in all.*/\1/p' "$tmp/mlp1.txt")
if [ -z "$measured" ] || [ -z "$predicted" ] ||
   ! awk -v p="$predicted" -v n="$measured" 'BEGIN { r = p * 1e6 / n; exit !(n > 0 && r >= 0.8 && r <= 1.2) }'; then
  echo "FAIL: mlp_train: predicted link time '$predicted' ms vs the emulator's link.host.ns '$measured' (want within 20%)"
  show "$tmp/mlp1.txt"; fail=1
fi
# the emulator's link charges, step by step (--link-trace): each step's
# measured link time within 20% of its predicted one (or both under 0.05 ms)
bad=$(steps_of "$tmp/mlp1.txt" | awk '{ p = $10; m = $12; d = p - m; if (d < 0) d = -d
  if (NF < 13 || (d > 0.2 * m && (p >= 0.05 || m >= 0.05))) print $1 }')
[ -z "$bad" ] || { echo "FAIL: mlp_train: measured link time off the predicted in steps $bad"; show "$tmp/mlp1.txt"; fail=1; }
trace_ms=$(sed -n 's/.*measured link time \([0-9.]*\) ms in all.*/\1/p' "$tmp/mlp1.txt")
awk -v t="$trace_ms" -v n="$measured" 'BEGIN { exit !(t != "" && n > 0 && t * 1e6 >= n * 0.999 && t * 1e6 <= n * 1.001) }' ||
  { echo "FAIL: mlp_train: the trace's link time '$trace_ms' ms is not the emulator's link.host.ns '$measured'"; fail=1; }
! grep -q 'advice: thrashing' "$tmp/mlp1.txt" || { echo "FAIL: mlp_train: thrashing advice"; show "$tmp/mlp1.txt"; fail=1; }
moves=$(steps_of "$tmp/mlp1.txt" | awk '{ s += $2 + $3 } END { print s + 0 }')
[ "$moves" -gt 0 ] || { echo "FAIL: mlp_train: step order moved no page"; show "$tmp/mlp1.txt"; fail=1; }
# Link bytes with and without step order: the order learned at one boundary
# must pay off at the next (the step plan keeps the layout).
on=$(awk '/^emu end/ { print $7 }' "$tmp/mlp1.err") off=$(awk '/^emu end/ { print $7 }' "$tmp/mlp0.err")
echo "mlp_train link bytes: step order on $on, off $off"
[ -n "$on" ] && [ -n "$off" ] && [ "$on" -lt "$off" ] ||
  { echo "FAIL: mlp_train: step order moved $on link bytes, not fewer than $off without it"; fail=1; }

# ---- the steady and rotating hot buffer
run_prog() {   # name mode order
  EMU_DEVICE_MEMORY=24M TRAINSHIM_OFFLOAD=on TRAINSHIM_OFFLOAD_STEP_ORDER=$3 TRAINSHIM_LOG="$tmp/$1.log" \
    LD_PRELOAD="$shim" "$prog" "$2" 8 > "$tmp/$1.out" 2> "$tmp/$1.err" || { echo "FAIL: $1 run:"; cat "$tmp/$1.err"; fail=1; }
  "$prog" "$2" 8 > "$tmp/$1.plain" || { echo "FAIL: $1 plain run"; fail=1; }
  cmp -s "$tmp/$1.plain" "$tmp/$1.out" || { echo "FAIL: $1: checksum differs with the shim"; cat "$tmp/$1.plain" "$tmp/$1.out"; fail=1; }
  "$ts" report "$tmp/$1.log" > "$tmp/$1.txt" 2>&1
}
run_prog steady steady 1
run_prog fixed steady 0
run_prog rotate rotate 1
run_prog coll coll 1
run_prog collfixed coll 0
steps_of "$tmp/steady.txt" | awk '$2 >= 4 && $3 >= 4 { found = 1 } END { exit !found }' ||
  { echo "FAIL: steady: no boundary promoted and demoted the hot buffer's pages"; show "$tmp/steady.txt"; fail=1; }
last_host() { steps_of "$1" | grep -v '+' | tail -1 | awk '{ print $6 }'; }
[ "$(last_host "$tmp/steady.txt")" = 0 ] ||
  { echo "FAIL: steady: the last step still reached host pages"; show "$tmp/steady.txt"; fail=1; }
[ "$(last_host "$tmp/fixed.txt")" != 0 ] ||
  { echo "FAIL: steady without step order reached no host page: the test proves nothing"; show "$tmp/fixed.txt"; fail=1; }
# the same through a collective's buffer only
steps_of "$tmp/coll.txt" | awk '$2 >= 4 && $3 >= 4 { found = 1 } END { exit !found }' ||
  { echo "FAIL: coll: no boundary promoted and demoted the all-reduced buffer's pages"; show "$tmp/coll.txt"; fail=1; }
[ "$(last_host "$tmp/coll.txt")" = 0 ] ||
  { echo "FAIL: coll: the last step still reached host pages"; show "$tmp/coll.txt"; fail=1; }
[ "$(last_host "$tmp/collfixed.txt")" != 0 ] ||
  { echo "FAIL: coll without step order reached no host page: the test proves nothing"; show "$tmp/collfixed.txt"; fail=1; }
! grep -q 'advice: thrashing' "$tmp/steady.txt" || { echo "FAIL: steady: thrashing advice"; show "$tmp/steady.txt"; fail=1; }
grep -q 'advice: thrashing: [0-9]* of [0-9]* steps moved more bytes between device and host than their work reached (step [0-9]*: [0-9.]* MiB moved for [0-9.]* MiB reached' "$tmp/rotate.txt" ||
  { echo "FAIL: rotate: no thrashing advice"; show "$tmp/rotate.txt"; fail=1; }
[ $fail = 0 ] && echo "offload step ok: mlp_train predicted link ${predicted} ms, measured $(awk -v n="$measured" 'BEGIN { printf "%.3f", n / 1e6 }') ms; link bytes with step order $on, without $off"
exit $fail
