#!/usr/bin/env bash
# A GEMM-only training loop (tests/torch/case_gemm_train.py) on the emulated
# device: bit-identical losses and weights with and without the shim under
# emulator jitter and several seeds, and the same weights as the CPU within
# float tolerance.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

torch_py CUDA_VISIBLE_DEVICES= -- tests/torch/case_gemm_train.py cpu "$tmp/cpu.pt" > "$tmp/cpu.out"
for seed in 1 99; do
  for jitter in 0 200; do
    run="seed $seed jitter ${jitter}us"
    torch_py EMU_SEED=$seed EMU_JITTER_US=$jitter -- tests/torch/case_gemm_train.py cuda "$tmp/plain.pt" > "$tmp/plain.out"
    torch_shim EMU_SEED=$seed EMU_JITTER_US=$jitter TRAINSHIM_LOG="$tmp/log.$seed.$jitter.%p" -- \
      tests/torch/case_gemm_train.py cuda "$tmp/shim.pt" > "$tmp/shim.out"
    same_output "$run" "$tmp/plain.out" "$tmp/shim.out"
    "$TORCH_PY" - "$tmp/plain.pt" "$tmp/shim.pt" "$tmp/cpu.pt" "$run" <<'PY'
import sys, torch
plain, shim, cpu = (torch.load(p) for p in sys.argv[1:4])
for k in ("w1", "w2", "losses"):
    assert torch.equal(plain[k], shim[k]), f"{sys.argv[4]}: {k} differs with the shim"
    torch.testing.assert_close(plain[k].double(), cpu[k].double(), rtol=1e-4, atol=1e-5,
                               msg=lambda m: f"{sys.argv[4]}: {k} differs from the CPU: {m}")
print(f"{sys.argv[4]}: identical with and without the shim, CPU within 1e-4; loss",
      f"{plain['losses'][0].item():.4f} -> {plain['losses'][-1].item():.4f}")
PY
  done
done
# the shim saw every GEMM: 5 per step
json=$("$TRAINSHIM" report --json "$tmp"/log.1.0.*)
"$TORCH_PY" -c '
import json, sys
c = json.loads(sys.argv[1])["compute"]
assert c["gemm_calls"] == 5 * 12, c["gemm_calls"]
print("shim counted", c["gemm_calls"], "GEMMs,", c["gemm_flops"], "FLOPs")' "$json"
