#!/usr/bin/env bash
# A GEMM-only training loop (tests/torch/case_gemm_train.py) on the emulated
# device: bit-identical losses and weights with and without the shim under
# emulator jitter and several seeds, and the same weights as the CPU within
# float tolerance.  One run without jitter on torch's native allocator
# (TRAINSHIM_TORCH_BACKEND=off), one with 200 us and another seed as by
# default (trainshim adds backend:cudaMallocAsync and serves every tensor);
# the runs without the shim are on torch's native allocator.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

torch_py CUDA_VISIBLE_DEVICES= -- tests/torch/case_gemm_train.py cpu "$tmp/cpu.pt" > "$tmp/cpu.out" & cpu_pid=$!
for run_env in "1 0 off" "7 200 default"; do
  read -r seed jitter backend <<< "$run_env"
    run="seed $seed jitter ${jitter}us backend $backend"
    backend_env=(); [ "$backend" = default ] || backend_env=(TRAINSHIM_TORCH_BACKEND=$backend)
    torch_py EMU_SEED=$seed EMU_JITTER_US=$jitter -- tests/torch/case_gemm_train.py cuda "$tmp/plain.pt" > "$tmp/plain.out" &
    plain_pid=$!
    torch_shim EMU_SEED=$seed EMU_JITTER_US=$jitter "${backend_env[@]}" TRAINSHIM_LOG="$tmp/log.$seed.$jitter.%p" -- \
      tests/torch/case_gemm_train.py cuda "$tmp/shim.pt" > "$tmp/shim.out" 2> "$tmp/shim.err" || { cat "$tmp/shim.err"; exit 1; }
    wait $plain_pid
    [ -z "$cpu_pid" ] || { wait $cpu_pid; cpu_pid=; }
    same_output "$run" "$tmp/plain.out" "$tmp/shim.out"
    no_shim_error "$tmp/shim.err"
    case $backend in off) want="left alone (TRAINSHIM_TORCH_BACKEND=off)" ;; *) want="cudaMallocAsync, added by trainshim" ;; esac
    want_torch_alloc "$want" "$tmp"/log.$seed.$jitter.*
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
# The shim saw every GEMM of the run, with its FLOPs (2mnk each), from the
# dims the script prints.
"$TRAINSHIM" report --format json "$tmp"/log.7.200.* > "$tmp/report.json"
"$TORCH_PY" - "$tmp/report.json" "$tmp/plain.out" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["compute"]
dims = json.loads(next(l for l in open(sys.argv[2]) if l.startswith("dims "))[5:])
N, D, H, O, steps = (dims[k] for k in ("N", "D", "HID", "O", "STEPS"))
# X W1, H W2 - Y, R.R, R W2^T, H^T R, X^T dH
per_step = [2 * N * D * H, 2 * N * H * O, 2 * N * O, 2 * N * O * H, 2 * H * N * O, 2 * D * N * H]
assert c["gemm_calls"] == len(per_step) * steps, (c["gemm_calls"], len(per_step) * steps)
assert c["gemm_flops"] == sum(per_step) * steps, (c["gemm_flops"], sum(per_step) * steps)
print("shim counted", c["gemm_calls"], "GEMMs,", c["gemm_flops"], "FLOPs, as the dims say")
PY
