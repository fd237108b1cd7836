#!/usr/bin/env bash
# GPT-2-small (tests/torch/gpt_small.py at the dims of
# tests/bench/bench_torch_gpt.sh) trained under the shim with torch's tensors
# served by trainshim (as by default: the shim adds backend:cudaMallocAsync)
# on the emulator in skip mode
# (no arithmetic, the real allocations), with the pool's step plan (the
# default): the emulator's counters show VMM driver calls
# (cuMemCreate/Map/Unmap/Release/SetAccess) while the pool warms up and the
# plan takes over, and none from the third step on (the plan is learnt from
# the first two steps and in force from the third, packed clear of the
# second step's tensors still alive; the pages it lacks move in when it is
# adopted, those under the second step's logits and gradients in advance,
# mapped twice until they die);
# torch's own max_memory_reserved stays within 0.5% of its
# max_memory_allocated.  With TRAINSHIM_ALLOC_STEP_PLAN=0 the pool maps no
# page from the third step on (its reserved peak is then higher: the
# benchmark prints both).  The report of each run's log says so in its
# "step plan" line: settled, every allocation from the third step at its
# planned address and no driver call since; off without the plan.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 8 --batch 8 --seq 1024 --layers 12 --dim 768 --heads 12 --vocab 50304 --vmm-calls)
run() { # name [env...]
  local name=$1; shift
  gpt_mem "$tmp/$name" torch_shim "TRAINSHIM_LOG=$tmp/$name.log" "$@" -- "${dims[@]}" || exit 1
  grep -qx done "$tmp/$name"
  echo "$name: VMM calls per step:$(awk '/^vmm step/ {printf " %s", $4}' "$tmp/$name"); $(grep ^peak_reserved "$tmp/$name")"
  "$TRAINSHIM" report "$tmp/$name.log" | grep '^step plan' > "$tmp/$name.plan" || true
  echo "$name: $(cat "$tmp/$name.plan")"
}
run plan
run noplan TRAINSHIM_ALLOC_STEP_PLAN=0
grep -Eqx 'step plan +period [0-9]+ allocations, 100\.0% of [0-9]+ at their planned address; settled, 0 driver calls since' \
  "$tmp/plan.plan" || { echo "the report's step plan line is not a settled plan's with no driver call since"; exit 1; }
grep -qx 'step plan           off (TRAINSHIM_ALLOC_STEP_PLAN=0)' "$tmp/noplan.plan" ||
  { echo "the report does not say the plan was off"; exit 1; }
python3 - "$tmp/plan" "$tmp/noplan" <<'PY'
import sys
sys.path.insert(0, "tests/torch")
from gpt_run import read as read_run
def read(path):
    run = read_run(path)
    assert len(run.calls) == 8, f"{path}: expected 8 steps of VMM counts, got {run.calls}"
    assert run.calls[0] > 0, "the first step made no VMM call: the counters measure nothing"
    assert run.backend == "cudaMallocAsync", f"{path}: torch ran on {run.backend}, not on the backend the shim adds"
    return run.calls, run.reserved, run.allocated
calls, res, alloc = read(sys.argv[1])
assert calls[2:] == [0] * 6, f"step plan: VMM calls from the third step: {calls}"
assert res <= alloc * 1.005, f"step plan: peak reserved {res} over 1.005x peak allocated {alloc}"
calls, res0, alloc0 = read(sys.argv[2])
assert calls[2:] == [0] * 6, f"no plan: VMM calls in the steady state: {calls}"
assert alloc0 == alloc, f"peak allocated differs with the plan ({alloc}) and without ({alloc0})"
print(f"peak reserved / peak allocated: step plan {res / alloc:.4f}, without {res0 / alloc0:.4f}")
PY
