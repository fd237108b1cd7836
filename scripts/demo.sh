#!/usr/bin/env bash
# The main job: a small MLP training run (tests/workloads/mlp_train) under
# trainshim, followed by its report.  Runs on the GPU when a driver is
# present, otherwise on trainshim's CUDA emulator (build/emu).  With Open
# MPI's mpirun it trains data parallel on two ranks (gradients all-reduced
# through NCCL), one trainshim log per rank, and reports over all of them;
# without mpirun, on one rank.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
if [ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
  echo "demo: NVIDIA driver found: running on the GPU"
else
  echo "demo: no GPU driver on this machine: running on trainshim's CUDA emulator ($B/emu)"
  export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
logdir=${DEMO_LOGDIR:-$B/demo}
mkdir -p "$logdir"; rm -f "$logdir"/trainshim.r*.log
# Every report section on: allocation call stacks (TOP ALLOCATION SITES) and
# CUPTI activity (GPU TIMELINE).
export TRAINSHIM_STACKS=${TRAINSHIM_STACKS:-16} TRAINSHIM_CUPTI=${TRAINSHIM_CUPTI:-1}
# The demo's batches are small (32 KiB of inputs per rank and step), below the
# default TRAINSHIM_PINNED_COPY_MIN (256 KiB, where conversion starts to pay
# on a PCIe link): lower it so the pinned copy engine shows in COPIES.
export TRAINSHIM_PINNED_COPY_MIN=${TRAINSHIM_PINNED_COPY_MIN:-16KiB}
steps=${DEMO_STEPS:-20} batch=1024
# Each step waits 5 ms for its batch, as a job waits for its data loader:
# the GPU idles meanwhile, which the report's GPU TIMELINE and ADVICE show.
export MLP_LOAD_MS=${MLP_LOAD_MS:-5}
# one log per rank, named by the rank the shim reads from the launcher
shim=("$B/trainshim" run --log "$logdir/trainshim.r%r.log" --)
job=("$B/workloads/mlp_train" "$steps" "$batch")
ranks=${DEMO_RANKS:-2}
if [ "$ranks" -gt 1 ] && command -v mpirun > /dev/null; then
  echo "demo: $ranks ranks through mpirun (data parallel, gradients all-reduced with NCCL), global batch $batch"
  mpi=(mpirun -np "$ranks" --oversubscribe --bind-to none --mca btl self,tcp)
  [ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
  # the launcher runs under `trainshim run` like any job; its ranks inherit
  # the preload, and the NCCL id's rendezvous file goes beside the logs
  MLP_RENDEZVOUS="$(cd "$logdir" && pwd)/nccl.id" "${shim[@]}" "${mpi[@]}" -x MLP_RENDEZVOUS -x MLP_LOAD_MS "${job[@]}"
else
  if [ "$ranks" -gt 1 ]; then
    echo "demo: mpirun not found (scripts/setup.sh installs openmpi-bin): one rank, so COMMUNICATION stays empty"
  fi
  "${shim[@]}" "${job[@]}"
fi
echo
"$B/trainshim" report "$logdir"/trainshim.r*.log
# the same figures as one page to open in a browser (charts, no network)
"$B/trainshim" report --html "$logdir/report.html" "$logdir"/trainshim.r*.log
