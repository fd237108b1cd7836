#!/usr/bin/env bash
# The mfu_hfu advice on a real torch run: the small GPT of gpt_small.py
# (tests/torch/case_checkpoint.py) with every block checkpointed
# (torch.utils.checkpoint) and without, in skip mode under `trainshim run`.
# With checkpointing the rule fires, and its recomputed FLOPs per step equal
# what the checkpointed run's non-batched GEMMs add per step over the plain
# run's (from the two reports' shape tables: an independent count), its
# share that over the checkpointed step's FLOPs.  Without checkpointing it
# stays silent, though attention's batched GEMMs repeat forward shapes in
# the backward.  As by default: trainshim adds backend:cudaMallocAsync.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for mode in checkpoint plain; do
  LD_LIBRARY_PATH="$EMU_DIR" LD_PRELOAD="$EMU_PRELOAD" EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip PYTHONDONTWRITEBYTECODE=1 \
    "$TRAINSHIM" run --log "$tmp/$mode.log" -- "$TORCH_PY" tests/torch/case_checkpoint.py $mode \
    > "$tmp/$mode.out" 2> "$tmp/$mode.err" || { echo "$mode: failed:"; tail -20 "$tmp/$mode.err"; exit 1; }
  grep -qx done "$tmp/$mode.out"
  no_shim_error "$tmp/$mode.err"
  want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp/$mode.log"
  "$TRAINSHIM" report --format json "$tmp/$mode.log" > "$tmp/$mode.json"
  "$TRAINSHIM" report "$tmp/$mode.log" > "$tmp/$mode.txt"
done
"$TORCH_PY" - "$tmp" <<'PY'
import json, math, sys
d = sys.argv[1]
rep = {m: json.load(open(f"{d}/{m}.json")) for m in ("checkpoint", "plain")}
adv = {m: {a["rule"]: a for a in rep[m].get("advice", [])} for m in rep}
steps = json.loads(next(l for l in open(f"{d}/checkpoint.out") if l.startswith("dims "))[5:])["steps"]
for m in rep:
    assert rep[m]["compute"]["steps"] == steps, (m, rep[m]["compute"]["steps"])

def flops(m, batched):
    out = {}
    for s in rep[m]["compute"]["shapes"]:
        if (s["batch"] > 1) == batched:
            out[(s["m"], s["n"], s["k"], s["batch"], s["transa"], s["transb"])] = s["flops"]
    return out

ck, pl = flops("checkpoint", False), flops("plain", False)
extra = sum(ck.values()) - sum(pl.values())
assert extra > 0 and all(ck.get(k, 0) >= v for k, v in pl.items()), "the checkpointed run lacks GEMMs of the plain one"
assert "mfu_hfu" in adv["checkpoint"], f"checkpoint: no mfu_hfu advice: {sorted(adv['checkpoint'])}"
a = adv["checkpoint"]["mfu_hfu"]
f = a["figures"]
assert f["recomputed_flops_per_step"] == extra / steps, (f["recomputed_flops_per_step"], extra / steps)
step_flops = rep["checkpoint"]["compute"]["gemm_flops"] / steps
assert math.isclose(f["recompute_flop_share"], extra / steps / step_flops, rel_tol=1e-5), f
if f["hfu"] is None:
    assert f["mfu"] is None and "no step time" in a["text"], a
else:
    assert math.isclose(f["mfu"], f["hfu"] * (1 - f["recompute_flop_share"]), rel_tol=1e-5), f
assert "- " + a["text"] in open(f"{d}/checkpoint.txt").read(), "not in the text ADVICE section"
assert "mfu_hfu" not in adv["plain"], adv["plain"]["mfu_hfu"]["text"]
print("checkpoint:", a["text"])
print("plain: no mfu_hfu advice")
PY
echo "PASS: mfu_hfu counts the recomputed GEMMs of a checkpointed GPT (as its difference from the plain run) and stays silent without checkpointing"
