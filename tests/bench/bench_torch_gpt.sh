#!/usr/bin/env bash
# GPT-2-small (12 layers, d 768, 12 heads, 1024 tokens, batch 8, vocab 50304)
# training steps on the emulator in skip mode (tests/torch/gpt_small.py: the
# real allocations, no arithmetic), with torch's own peak reserved / peak
# allocated figures for three allocators in one run: torch native, torch
# expandable_segments:True, and trainshim serving every tensor (the shim's
# default: backend:cudaMallocAsync, figures from trainshim's pool), and
# trainshim without its step plan (TRAINSHIM_ALLOC_STEP_PLAN=0), over 8
# steps (the plan is in force from the third, with no VMM call from the
# third on).  The ratios are trainshim's peak reserved over each torch figure
# and over its own peak allocated.  A second
# table runs the same model on batches of random length (128-1024 tokens,
# the same lengths in every run), where torch's native allocator fragments
# most.
# Skipped (exit 0 with a line) when the torch venv cannot be made.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build}
. tests/torch/lib.sh
rc=0
( torch_env ) > /dev/null 2>&1 || rc=$?
[ $rc = 0 ] || { echo "skipped: no torch venv (scripts/setup-torch.sh exit $rc)"; exit 0; }
torch_env
dims=(--steps ${BENCH_GPT_STEPS:-8} --batch 8 --seq 1024 --layers 12 --dim 768 --heads 12 --vocab 50304)
run_one() { # runner name [env...] (extra gpt_small.py arguments in $extra)
  local runner=$1 name=$2; shift 2
  "$runner" EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip "$@" -- tests/bench/torch_gpt_mem.py tests/torch/gpt_small.py \
    "${dims[@]}" $extra 2> /dev/null | sed -n "s/^peak_reserved /$name /p"
}
table() { # title: the three runs and their ratios
  local out
  out=$( {
    run_one torch_py native TRAINSHIM=0
    run_one torch_py expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    run_one torch_shim trainshim TRAINSHIM_LOG=off
    run_one torch_shim no-plan TRAINSHIM_LOG=off TRAINSHIM_ALLOC_STEP_PLAN=0
  } )
  echo "$1 (bytes, torch's max_memory_reserved / max_memory_allocated)"
  python3 - "$out" <<'PY'
import sys
rows = {}
for line in sys.argv[1].splitlines():
    f = line.split()
    rows[f[0]] = (int(f[1]), int(f[3]), f[5])
print(f"  {'allocator':<12} {'peak reserved':>15} {'peak allocated':>15}  backend")
for k in ("native", "expandable", "trainshim", "no-plan"):
    if k in rows:
        r, a, b = rows[k]
        print(f"  {k:<12} {r:>15} {a:>15}  {b}")
if "trainshim" in rows and rows["trainshim"][2] != "cudaMallocAsync":
    print(f"  the shim's default did not put torch on cudaMallocAsync: {rows['trainshim'][2]}")
    sys.exit(1)
if all(k in rows for k in ("native", "expandable", "trainshim")):
    for k in ("native", "expandable"):
        print(f"  {k} peak reserved / its own peak allocated {rows[k][0] / rows[k][1]:.4f}")
    for k in ("trainshim", "no-plan"):
        if k not in rows:
            continue
        t = rows[k][0]
        print(f"  {k} peak reserved / native {t / rows['native'][0]:.4f}, / expandable {t / rows['expandable'][0]:.4f}"
              f", / its own peak allocated {t / rows[k][1]:.4f} (goal <= 1.005)")
else:
    print("  a run failed: ", sorted(rows))
    sys.exit(1)
PY
}
steps=${BENCH_GPT_STEPS:-8}
extra=""
table "GPT-2-small, batch 8 x 1024 tokens, $steps steps" || rc=1
extra="--random-seq 128"
table "GPT-2-small, batch 8 x random 128-1024 tokens, $steps steps" || rc=1
exit $rc
