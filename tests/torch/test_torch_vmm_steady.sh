#!/usr/bin/env bash
# GPT-2-small (tests/torch/gpt_small.py at the dims of
# tests/bench/bench_torch_gpt.sh) trained under the shim with torch's tensors
# served by trainshim (as by default: the shim adds backend:cudaMallocAsync;
# gpt_small.py prints the backend torch ran on) on the emulator in skip mode
# (no arithmetic, the real allocations): the emulator's counters show VMM
# driver calls (cuMemCreate/Map/Unmap/Release/SetAccess) while the pool warms
# up in the first two steps and none from the third step on.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 5 --batch 8 --seq 1024 --layers 12 --dim 768 --heads 12 --vocab 50304 --vmm-calls)
torch_shim EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip TRAINSHIM_LOG=off \
  -- tests/torch/gpt_small.py "${dims[@]}" > "$tmp/out" 2> "$tmp/err" \
  || { echo "gpt_small.py failed:"; tail -30 "$tmp/err"; exit 1; }
no_shim_error "$tmp/err"
grep -qx done "$tmp/out"
grep -qx 'backend cudaMallocAsync' "$tmp/out" || { echo "torch not on cudaMallocAsync: $(grep '^backend' "$tmp/out")"; exit 1; }
echo "VMM calls per step:$(awk '/^vmm step/ {printf " %s", $4}' "$tmp/out")"
python3 - "$tmp/out" <<'PY'
import sys
calls = [int(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("vmm step ")]
assert len(calls) == 5, f"expected 5 steps of VMM counts, got {calls}"
assert calls[0] > 0, "the first step made no VMM call: the counters measure nothing"
assert calls[2:] == [0, 0, 0], f"VMM calls in the steady state: {calls}"
PY
