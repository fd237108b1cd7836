#!/usr/bin/env bash
# `make demo-torch`: a small GPT (tests/torch/gpt_small.py: embeddings,
# attention written with matmul, MLP, LayerNorm, AdamW, cross-entropy)
# trained with real PyTorch under `trainshim run`, then its report.  Without
# a GPU it runs on trainshim's CUDA emulator in skip mode: torch's kernels
# and the GEMMs' arithmetic are skipped (the losses mean nothing), while the
# allocations, copies, GEMM shapes and FLOPs trainshim reports are the real
# ones.  The venv comes from scripts/setup-torch.sh (first run: a download).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
. tests/torch/lib.sh
rc=0; (torch_env) || rc=$?
if [ $rc = 77 ]; then echo "demo-torch: skipped: PyPI cannot be reached to install torch"; exit 0; fi
[ $rc = 0 ] || exit $rc
torch_env
logdir=${DEMO_LOGDIR:-$B/demo-torch}
mkdir -p "$logdir"; rm -f "$logdir"/trainshim.*.log
args=(--steps "${DEMO_STEPS:-5}" --batch 8 --seq 128 --layers 4 --dim 256 --heads 8 --vocab 4096)
if [ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
  echo "demo-torch: NVIDIA driver found: training on the GPU"
  "$TRAINSHIM" run --log "$logdir/trainshim.%p.log" -- "$TORCH_PY" tests/torch/gpt_small.py "${args[@]}"
else
  echo "demo-torch: no GPU driver: training on trainshim's CUDA emulator ($B/emu) in skip mode"
  echo "demo-torch: EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip: losses are meaningless; memory, copies, GEMM shapes and FLOPs are real"
  LD_LIBRARY_PATH="$EMU_DIR" LD_PRELOAD="$EMU_PRELOAD" EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip \
    "$TRAINSHIM" run --log "$logdir/trainshim.%p.log" -- "$TORCH_PY" tests/torch/gpt_small.py "${args[@]}"
fi
echo
"$TRAINSHIM" report "$logdir"/trainshim.*.log
