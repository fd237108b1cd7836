#!/usr/bin/env bash
# torch.empty/del churn of mixed sizes (tests/bench/torch_churn.py), CPU ns per
# tensor, in one run: torch's native caching allocator without the shim (the
# baseline), torch's cudaMallocAsync backend without the shim (the emulated
# driver pool), and trainshim serving every tensor (the shim's default), with
# its log off and logging.  A shared machine drifts by tens of percent over a
# minute, and a virtual machine's CPU time includes what the host took from
# it, so the four are run in turn, CHURN_REPS times (default 7), and the
# figures printed are medians over the repetitions; the ratio is the median
# of each repetition's own ratio (trainshim against the native run next to
# it), the one least moved by drift, printed beside the ratio of the best
# runs (the least disturbed of each).
# Skipped (exit 0 with a line) when the torch venv cannot be made.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build}
REPS=${CHURN_REPS:-7}
. tests/torch/lib.sh
rc=0
( torch_env ) > /dev/null 2>&1 || rc=$?
[ $rc = 0 ] || { echo "skipped: no torch venv (scripts/setup-torch.sh exit $rc)"; exit 0; }
torch_env
churn() { awk -v backend="$1" '/^churn/ && $5 == backend {print $2}'; } # a run on another backend: none
native=() async=() shim=() shim_log=()
for ((i = 0; i < REPS; i++)); do
  native+=("$(torch_py -- tests/bench/torch_churn.py 2> /dev/null | churn native)")
  shim+=("$(torch_shim TRAINSHIM_LOG=off -- tests/bench/torch_churn.py 2> /dev/null | churn cudaMallocAsync)")
  shim_log+=("$(torch_shim TRAINSHIM_LOG=/dev/null -- tests/bench/torch_churn.py 2> /dev/null | churn cudaMallocAsync)")
  async+=("$(torch_py PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- tests/bench/torch_churn.py 2> /dev/null | churn cudaMallocAsync)")
done
python3 - "$REPS" "${native[*]}" "${async[*]}" "${shim[*]}" "${shim_log[*]}" << 'PY'
import statistics, sys
reps = int(sys.argv[1])
runs = [s.split() for s in sys.argv[2:]]
if any(len(r) != reps for r in runs):
    print("  a run failed")
    sys.exit(1)
native, asyn, shim, shim_log = ([float(v) for v in r] for r in runs)
med = statistics.median
print(f"torch.empty/del churn, CPU ns per tensor (best of 20 rounds of 10000 per run), median of {reps} runs each, run in turn")
for name, v in (("torch native caching allocator (baseline)", native), ("torch cudaMallocAsync, no shim", asyn),
                ("trainshim-served, log off", shim), ("trainshim-served, logging", shim_log)):
    print(f"  {name:<44} {med(v):8.0f}   (runs: {' '.join(f'{x:.0f}' for x in v)})")
off = [s / n for s, n in zip(shim, native)]
on = [s / n for s, n in zip(shim_log, native)]
print(f"  trainshim / native, median of per-run ratios: {med(off):.2f}x log off, {med(on):.2f}x logging"
      f"  (ranges {min(off):.2f}-{max(off):.2f}, {min(on):.2f}-{max(on):.2f})")
print(f"  trainshim / native, best run against best run: {min(shim) / min(native):.2f}x log off, "
      f"{min(shim_log) / min(native):.2f}x logging")
PY
