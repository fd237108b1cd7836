#!/usr/bin/env bash
# Memory offload figures (TRAINSHIM_OFFLOAD=on), each beside its baseline
# from the same run, on a simulated 25 GB/s host link (EMU_HOST_LINK_GBPS):
#   - the demo trainer (mlp_train, batch 16384: ~46 MiB at peak) on a device
#     with 1/1.5 of that (1.5x oversubscription), with step-order placement
#     (TRAINSHIM_OFFLOAD_STEP_ORDER=1, the default) and without it, against
#     the same job on an unlimited device, all under the shim: wall time of
#     the whole run (the emulator sleeps each host-link transfer, so the ratio
#     is the simulated slowdown; target <= 1.25), and the report's predicted
#     link time beside the emulator's link.host.ns (MLP_EMU_COUNTERS);
#   - pause + resume of a 2 GiB working set: the emulator's simulated link
#     time against bytes / link rate (target <= 1.1x).
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
bin=$B/workloads/mlp_train
shim=$PWD/$B/libtrainshim.so
for f in "$bin" "$shim" "$B/tests/integration/test_offload_pause"; do
  [ -e "$f" ] || { echo "bench_offload: $f not built" >&2; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export TRAINSHIM_LOG="$tmp/trainshim.%p.log" EMU_HOST_LINK_GBPS=25
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
steps=8 batch=16384
run() {   # label, then env assignments; prints seconds
  local label=$1; shift
  local t0=$(date +%s.%N)
  env "$@" LD_PRELOAD="$shim" "$bin" $steps $batch > "$tmp/$label.out" 2> "$tmp/$label.err" || { echo "bench_offload: $label failed" >&2; tail -3 "$tmp/$label.err" >&2; return 1; }
  awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'
}
base=$(run unlimited EMU_DEVICE_MEMORY=80G) || exit 1
over=$(run oversubscribed EMU_DEVICE_MEMORY=30M TRAINSHIM_OFFLOAD=on MLP_EMU_COUNTERS=1 TRAINSHIM_LOG="$tmp/over.log") || exit 1
fixed=$(run fixed EMU_DEVICE_MEMORY=30M TRAINSHIM_OFFLOAD=on TRAINSHIM_OFFLOAD_STEP_ORDER=0) || exit 1
printf '  mlp_train %s steps, batch %s, 25 GB/s host link\n' $steps $batch
printf '  %-52s %8s s\n' "unlimited device (baseline)" "$base"
for v in "oversubscribed:30 MiB device (1.5x), offload on, step order on:$over" \
         "fixed:30 MiB device (1.5x), offload on, step order off:$fixed"; do
  IFS=: read -r label what secs <<< "$v"
  same=yes; cmp -s "$tmp/unlimited.out" "$tmp/$label.out" || same=NO
  printf '  %-52s %8s s   ratio %.3f (target <= 1.25), same results: %s\n' "$what" "$secs" \
    "$(awk -v a="$secs" -v b="$base" 'BEGIN { print a / b }')" $same
done
measured=$(awk '/^emu end/ { print $5 }' "$tmp/oversubscribed.err")
predicted=$("$B/trainshim" report "$tmp/over.log" 2>/dev/null | sed -n 's/.*predicted link time \([0-9.]*\) ms in all.*/\1/p')
printf '  step order on: predicted link time %s ms, emulator link.host.ns %.3f ms, ratio %.3f (target 0.8-1.2)\n' \
  "$predicted" "$(awk -v n="$measured" 'BEGIN { print n / 1e6 }')" "$(awk -v p="$predicted" -v n="$measured" 'BEGIN { print p * 1e6 / n }')"
line=$(LD_LIBRARY_PATH=$PWD/$B/emu "$B/tests/integration/test_offload_pause" 2>&1 | grep 'simulated link time') || { echo "bench_offload: pause run failed" >&2; exit 1; }
echo "  $line (target <= 1.1x)"
