#!/usr/bin/env bash
# Memory offload figures (TRAINSHIM_OFFLOAD=on), each beside its baseline
# from the same run, on a simulated 25 GB/s host link (EMU_HOST_LINK_GBPS):
#   - the demo trainer (mlp_train, batch 16384: ~46 MiB at peak) on a device
#     with 1/1.5 of that (1.5x oversubscription), against the same job on an
#     unlimited device, both under the shim: wall time of the whole run (the
#     emulator sleeps each host-link transfer, so the ratio is the simulated
#     slowdown; target <= 1.25);
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
steps=4 batch=16384
run() {   # label, then env assignments; prints seconds
  local label=$1; shift
  local t0=$(date +%s.%N)
  env "$@" LD_PRELOAD="$shim" "$bin" $steps $batch > "$tmp/$label.out" 2> "$tmp/$label.err" || { echo "bench_offload: $label failed" >&2; tail -3 "$tmp/$label.err" >&2; return 1; }
  awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'
}
base=$(run unlimited EMU_DEVICE_MEMORY=80G) || exit 1
over=$(run oversubscribed EMU_DEVICE_MEMORY=30M TRAINSHIM_OFFLOAD=on) || exit 1
same=yes; cmp -s "$tmp/unlimited.out" "$tmp/oversubscribed.out" || same=NO
printf '  mlp_train %s steps, batch %s, 25 GB/s host link\n' $steps $batch
printf '  %-44s %8s s\n' "unlimited device (baseline)" "$base"
printf '  %-44s %8s s   ratio %.3f (target <= 1.25), same results: %s\n' "30 MiB device, 1.5x oversubscribed, offload on" "$over" \
  "$(awk -v a="$over" -v b="$base" 'BEGIN { print a / b }')" $same
line=$(LD_LIBRARY_PATH=$PWD/$B/emu "$B/tests/integration/test_offload_pause" 2>&1 | grep 'simulated link time') || { echo "bench_offload: pause run failed" >&2; exit 1; }
echo "  $line (target <= 1.1x)"
