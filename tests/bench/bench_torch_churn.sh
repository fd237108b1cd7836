#!/usr/bin/env bash
# torch.empty/del churn of mixed sizes (tests/bench/torch_churn.py), CPU ns per
# tensor, in one run: torch's native caching allocator without the shim (the
# baseline), torch's cudaMallocAsync backend without the shim (the emulated
# driver pool), and trainshim serving every tensor (the shim's default).
# Skipped (exit 0 with a line) when the torch venv cannot be made.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build}
. tests/torch/lib.sh
rc=0
( torch_env ) > /dev/null 2>&1 || rc=$?
[ $rc = 0 ] || { echo "skipped: no torch venv (scripts/setup-torch.sh exit $rc)"; exit 0; }
torch_env
native=$(torch_py -- tests/bench/torch_churn.py 2> /dev/null | awk '/^churn/ {print $2}')
async=$(torch_py PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- tests/bench/torch_churn.py 2> /dev/null | awk '/^churn/ {print $2}')
shim=$(torch_shim TRAINSHIM_LOG=off TRAINSHIM_TORCH_BACKEND=cudaMallocAsync -- tests/bench/torch_churn.py 2> /dev/null | awk '/^churn/ {print $2}')
shim_log=$(torch_shim TRAINSHIM_LOG=/dev/null TRAINSHIM_TORCH_BACKEND=cudaMallocAsync -- tests/bench/torch_churn.py 2> /dev/null | awk '/^churn/ {print $2}')
echo "torch.empty/del churn, CPU ns per tensor (best of 5 rounds of 40000)"
printf '  %-44s %8s\n' "torch native caching allocator (baseline)" "$native" \
  "torch cudaMallocAsync, no shim" "$async" "trainshim-served, log off" "$shim" "trainshim-served, logging" "$shim_log"
[ -n "$native" ] && [ -n "$shim" ] && [ -n "$shim_log" ] || { echo "  a run failed"; exit 1; }
python3 -c "import sys; n,s,l=map(float,sys.argv[1:]); print(f'  trainshim / native: {s/n:.2f}x log off, {l/n:.2f}x logging')" "$native" "$shim" "$shim_log"
