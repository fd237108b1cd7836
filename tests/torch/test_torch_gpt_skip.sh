#!/usr/bin/env bash
# A small GPT (tests/torch/gpt_small.py) trained under `trainshim run` on the
# emulator in skip mode (EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip): it
# completes, and the report's GEMM FLOPs equal the analytic count within 1%:
# three times the forward pass's GEMMs (forward, grad of the input, grad of
# the weight), attention's two matmuls included, from the model's dims.  As
# by default: trainshim adds backend:cudaMallocAsync and serves every tensor.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 3 --batch 4 --seq 64 --layers 2 --dim 128 --heads 4 --vocab 512)
LD_LIBRARY_PATH="$EMU_DIR" LD_PRELOAD="$EMU_PRELOAD" EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip \
  "$TRAINSHIM" run --log "$tmp/gpt.%p.log" -- "$TORCH_PY" tests/torch/gpt_small.py "${dims[@]}" \
  > "$tmp/out" 2> "$tmp/err" || { echo "gpt_small.py failed:"; tail -30 "$tmp/err"; exit 1; }
cat "$tmp/out"
grep -qx done "$tmp/out"
no_shim_error "$tmp/err"
want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp"/gpt.*.log
"$TRAINSHIM" report --format json "$tmp"/gpt.*.log > "$tmp/report.json"
"$TORCH_PY" - "$tmp/out" "$tmp/report.json" <<'PY'
import json, sys
dims = json.loads(next(l for l in open(sys.argv[1]) if l.startswith("dims "))[5:])
B, T, L, C, V, steps = (dims[k] for k in ("batch", "seq", "layers", "dim", "vocab", "steps"))
tokens = B * T
per_layer = (2 * tokens * C * 3 * C      # qkv projection
             + 2 * tokens * T * C        # scores = q k^T, all heads
             + 2 * tokens * T * C        # scores @ v
             + 2 * tokens * C * C        # output projection
             + 2 * tokens * C * 4 * C    # MLP up
             + 2 * tokens * 4 * C * C)   # MLP down
forward = L * per_layer + 2 * tokens * C * V  # + the LM head
want = 3 * forward * steps
c = json.load(open(sys.argv[2]))["compute"]
got = c["gemm_flops"]
err = abs(got - want) / want
print(f"GEMM FLOPs: report {got}, analytic {want} (3 x forward x {steps} steps), off by {100 * err:.3f}%; {c['gemm_calls']} GEMM calls")
assert err < 0.01, "report's GEMM FLOPs differ from the analytic count by more than 1%"
# six GEMMs per layer and the head, each with its two backward GEMMs
assert c["gemm_calls"] == 3 * (6 * L + 1) * steps, (c["gemm_calls"], 3 * (6 * L + 1) * steps)
PY
