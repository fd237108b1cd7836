#!/usr/bin/env bash
# A GPT trained with an evaluation pass (no gradients, batches of another
# shape) after every fourth step, as training scripts do, on the emulator in
# skip mode (the real allocations, no arithmetic), served by trainshim as by
# default: the pass interrupts the step plan, which waits for the pattern
# and resumes at the next step instead of being learnt again, so from the
# step after the one that follows the first pass no step (its pass
# included) makes a VMM call, and the pool does not grow for the passes: torch's max_memory_reserved stays within 5% of its
# max_memory_allocated and at most torch's own expandable segments' on the
# same run (measured 1.02x against 1.13x).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 13 --batch 8 --seq 512 --layers 6 --dim 512 --heads 8 --vocab 8192 --eval-every 4 --vmm-calls)
gpt_mem "$tmp/shim" torch_shim TRAINSHIM_LOG=off -- "${dims[@]}" || exit 1
gpt_mem "$tmp/torch" torch_py PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "${dims[@]}" || exit 1
python3 - "$tmp/shim" "$tmp/torch" <<'PY'
import sys
sys.path.insert(0, "tests/torch")
from gpt_run import read
calls, evals, res, alloc, backend = read(sys.argv[1])
assert backend == "cudaMallocAsync", f"torch ran on {backend}, not on the backend the shim adds"
assert evals == 6, f"{evals} evaluation batches, expected 6 (3 passes of 2)"
assert len(calls) == 13 and calls[0] > 0, f"VMM calls per step: {calls}"
assert calls[5:] == [0] * 8, f"VMM calls after the first evaluation pass and the step after it: {calls}"
_, _, tres, talloc, _ = read(sys.argv[2])
assert abs(talloc - alloc) <= alloc / 1000, f"peak allocated differs: trainshim {alloc}, torch {talloc}"
print(f"VMM calls per step {calls}; peak reserved / peak allocated: trainshim {res / alloc:.4f}, "
      f"torch expandable segments {tres / talloc:.4f}")
assert res <= alloc * 1.05, f"trainshim reserved {res / alloc:.4f}x its peak allocated"
assert res <= tres, f"trainshim reserved {res}, torch's expandable segments {tres}"
PY
