#!/usr/bin/env bash
# The main job: a small MLP training run (tests/workloads/mlp_train) under
# trainshim, followed by its report.  Runs on the GPU when a driver is
# present, otherwise on trainshim's CUDA emulator (build/emu).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
if [ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
  echo "demo: NVIDIA driver found: running on the GPU"
else
  echo "demo: no GPU driver on this machine: running on trainshim's CUDA emulator ($B/emu)"
  export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
logdir=$B/demo
rm -rf "$logdir"; mkdir -p "$logdir"
"$B/trainshim" run --log "$logdir/trainshim.%p.log" -- "$B/workloads/mlp_train" "${DEMO_STEPS:-20}" 1024
echo
"$B/trainshim" report "$logdir"/trainshim.*.log
