#!/usr/bin/env bash
# The issue's "done when": a GEMM-only torch loop in fp32 with a .item() per
# step (tests/torch/case_gemm_train.py) gets the precision and the
# synchronization advice with the right numbers.  Run under the shim with
# call stacks and CUPTI on the emulated device with jitter, its output equal
# to the run without the shim (the shim as by default: it adds
# backend:cudaMallocAsync; without it torch's native allocator); then from
# `trainshim report --format json`:
#   precision_fp32  every GEMM FLOP in fp32 (torch's default: no TF32), the
#                   FLOPs those of the loop's shapes (2mnk from the dims the
#                   script prints), the speed-ups of the H100 peak table;
#   host_sync       exactly one synchronization per full step: .item()'s
#                   cudaStreamSynchronize (its pinned copy does not wait, and
#                   nothing else syncs), its site the native .item() path
#                   (_local_scalar_dense), the GPU idle after it measured.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# torch loads its own libcupti (kineto) first: the emulator's goes in front,
# as lib.sh does for the other CUDA libraries
cupti=$EMU_DIR/libcupti.so.13
[ -f "$cupti" ] || { echo "$cupti missing: run make all" >&2; exit 1; }
torch_py EMU_SEED=3 EMU_JITTER_US=100 -- tests/torch/case_gemm_train.py cuda "$tmp/plain.pt" > "$tmp/plain.out"
_torch_launch "$SHIM_LIB:$EMU_PRELOAD:$cupti" EMU_SEED=3 EMU_JITTER_US=100 TRAINSHIM_STACKS=16 TRAINSHIM_CUPTI=1 \
  TRAINSHIM_LOG="$tmp/log.%p" -- tests/torch/case_gemm_train.py cuda "$tmp/shim.pt" > "$tmp/shim.out" 2> "$tmp/shim.err" \
  || { cat "$tmp/shim.err"; exit 1; }
same_output "seed 3 jitter 100us" "$tmp/plain.out" "$tmp/shim.out"
no_shim_error "$tmp/shim.err"
want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp"/log.*
"$TRAINSHIM" report --format json "$tmp"/log.* > "$tmp/report.json"
"$TORCH_PY" - "$tmp/report.json" "$tmp/plain.out" <<'PY'
import json, math, sys
rep = json.load(open(sys.argv[1]))
dims = json.loads(next(l for l in open(sys.argv[2]) if l.startswith("dims "))[5:])
N, D, H, O, steps = (dims[k] for k in ("N", "D", "HID", "O", "STEPS"))
flops = sum([2 * N * D * H, 2 * N * H * O, 2 * N * O, 2 * N * O * H, 2 * H * N * O, 2 * D * N * H]) * steps
adv = {a["rule"]: a for a in rep.get("advice", [])}
assert "precision_fp32" in adv, f"no precision line: {sorted(adv)}"
assert "host_sync" in adv, f"no synchronization line: {sorted(adv)}"
p = adv["precision_fp32"]["figures"]
assert p["fp32_flop_share"] == 1.0, p
assert p["fp32_flops"] == flops and p["gemm_flops"] == flops, (p, flops)
assert math.isclose(p["speedup_tf32"], 494.7 / 67, rel_tol=1e-6), p
assert math.isclose(p["speedup_bf16"], 989.4 / 67, rel_tol=1e-6), p
s = adv["host_sync"]
f = s["figures"]
assert f["steps"] == steps - 1, (f, steps)  # the full steps: every one detected
assert f["syncs_per_step"] == 1.0 and f["sync_calls_per_step"] == 1.0, f
assert f["copy_waits_per_step"] == 0.0, f
assert f["host_wait_ns_per_step"] > 0, f
assert f["gpu_idle_ns_per_step"] is not None and f["gpu_idle_ns_per_step"] >= 0, f
site = s["sites"][0]
assert len(s["sites"]) == 1 and site["api"] == "cudaStreamSynchronize" and site["per_step"] == 1.0, s["sites"]
assert any("_local_scalar_dense" in fr for fr in site["frames"]), site["frames"]
print(f"precision: {p['fp32_flops']} fp32 FLOPs of {flops}, x{p['speedup_tf32']:.2f} as TF32;",
      f"host_sync: {f['syncs_per_step']} per step over {f['steps']:.0f} steps at {site['api']}",
      f"< {site['frames'][0]}, host {f['host_wait_ns_per_step'] / 1e6:.3f} ms, GPU idle",
      f"{f['gpu_idle_ns_per_step'] / 1e6:.3f} ms per step")
PY
