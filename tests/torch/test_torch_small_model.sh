#!/usr/bin/env bash
# A small GPT (4 layers, d 256, vocabulary 8192) trained for 14 steps on the
# emulator in skip mode, served by trainshim as by default.  Its layers
# repeat inside a step, so the pool finds a plan of one layer's backward
# pass in the first step, long before the step's own: that plan must not
# let the rest of the first steps grow the pool (growth stays bounded while
# it is suspended).  torch's max_memory_reserved stays at most torch's own
# expandable segments' on the same run and within 7% of its
# max_memory_allocated (measured 1.045-1.049x; 1.50x when a layer's plan
# lifted the bound, 1.08-1.10x while a thread's cache could hold 32 MiB of
# freed blocks whatever the pool's size), and from the eighth step no step
# makes a VMM call: the step plan, adopted in the third, settles within a
# few of its two-step periods under the runner's jitter (measured zero from
# the fifth to the seventh step over 12 seeds; while a full thread cache
# refused new blocks instead of emptying, blocks parked long ago made the
# small arena grow by a page as late as the fourteenth step).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 14 --batch 8 --seq 256 --layers 4 --dim 256 --heads 4 --vocab 8192 --vmm-calls)
gpt_mem "$tmp/shim" torch_shim TRAINSHIM_LOG=off -- "${dims[@]}" || exit 1
gpt_mem "$tmp/torch" torch_py PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "${dims[@]}" || exit 1
python3 - "$tmp/shim" "$tmp/torch" <<'PY'
import sys
sys.path.insert(0, "tests/torch")
from gpt_run import read
calls, _, res, alloc, backend = read(sys.argv[1])
assert backend == "cudaMallocAsync", f"torch ran on {backend}, not on the backend the shim adds"
assert len(calls) == 14 and calls[0] > 0, f"VMM calls per step: {calls}"
_, _, tres, talloc, _ = read(sys.argv[2])
assert abs(talloc - alloc) <= alloc / 1000, f"peak allocated differs: trainshim {alloc}, torch {talloc}"
print(f"VMM calls per step {calls}; peak reserved / peak allocated: trainshim {res / alloc:.4f}, "
      f"torch expandable segments {tres / talloc:.4f}")
assert calls[7:] == [0] * 7, f"steps after the seventh made VMM calls: {calls}"
assert res <= alloc * 1.07, f"trainshim reserved {res / alloc:.4f}x its peak allocated"
assert res <= tres, f"trainshim reserved {res}, torch's expandable segments {tres}"
PY
