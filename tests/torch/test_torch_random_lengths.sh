#!/usr/bin/env bash
# GPT-2-small (the dims of tests/bench/bench_torch_gpt.sh) on batches of
# random length (128-1024 tokens), where no step repeats and no step plan
# forms: every tensor is placed before any plan, by the rules of
# alloc_plan.c's lowest_range (a range the request fills exactly first; a
# range of a size asked for lately kept for that size), on the emulator in
# skip mode (the real allocations, no arithmetic).  Two draws of the
# lengths (the benchmark's and the worst of the eight the README cites),
# each served by trainshim as by default and on torch's own expandable
# segments: trainshim's peak reserved stays within 0.5% of its peak
# allocated and under expandable segments' reserved; torch allocated the
# same bytes either way.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 8 --batch 8 --seq 1024 --layers 12 --dim 768 --heads 12 --vocab 50304 --random-seq 128)
for seed in 2 4; do
  gpt_mem "$tmp/shim$seed" torch_shim TRAINSHIM_LOG=off -- "${dims[@]}" --length-seed $seed || exit 1
  gpt_mem "$tmp/torch$seed" torch_py PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "${dims[@]}" \
    --length-seed $seed || exit 1
  python3 - "$tmp/shim$seed" "$tmp/torch$seed" "$seed" <<'PY'
import sys
sys.path.insert(0, "tests/torch")
from gpt_run import read
shim, torch, seed = read(sys.argv[1]), read(sys.argv[2]), sys.argv[3]
assert shim.backend == "cudaMallocAsync", f"torch ran on {shim.backend}, not on the backend the shim adds"
assert abs(shim.allocated - torch.allocated) <= torch.allocated / 1000, \
    f"lengths {seed}: peak allocated differs: trainshim {shim.allocated}, torch {torch.allocated}"
ratio, tratio = shim.reserved / shim.allocated, torch.reserved / torch.allocated
print(f"lengths {seed}: peak reserved / peak allocated: trainshim {ratio:.4f}, torch expandable segments {tratio:.4f}")
assert ratio <= 1.005, f"lengths {seed}: trainshim reserved {ratio:.4f}x its peak allocated (goal 1.005)"
assert shim.reserved <= torch.reserved, f"lengths {seed}: trainshim reserved more than expandable segments"
PY
done
