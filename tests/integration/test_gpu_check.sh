#!/usr/bin/env bash
# make gpu-check in its no-GPU mode (GPU_CHECK_EMU=1): every tests/gpu program
# and the demo job build with the GPU flags (sm_90/sm_100 SASS + PTX), the
# checks that can run on the emulator pass (with and without the shim:
# identical data, CUPTI records equal to what was launched), the others are
# listed as needing a device, and the results exist as JSON and markdown.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
GPU_CHECK_EMU=1 GPU_CHECK_OUT=$out B=$B bash scripts/gpu-check.sh > "$out/stdout" 2>&1
rc=$?
tail -5 "$out/stdout"
[ $rc = 0 ] || { echo "FAIL: gpu-check exited $rc"; cat "$out/results.md" 2>/dev/null || tail -40 "$out/stdout"; exit 1; }
grep -q '^no GPU: [0-9]* checks need a device' "$out/stdout" || { echo "FAIL: no 'no GPU: N checks need a device' line"; exit 1; }
python3 - "$out/results.json" <<'PY' || { echo "FAIL: results.json does not say what it should (above)"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
st = {c["name"]: c["status"] for c in r["checks"]}
figs = {c["name"]: {f["name"]: f["value"] for f in c["figures"]} for c in r["checks"]}
want = ["build", "probe", "semantics", "copies", "cupti", "demo", "alloc", "vmm", "hostvmm", "copy_threads",
        "torch_gpt", "torch_cost", "nccl", "torch_gpt_async", "replay", "hook_pair", "torch_mem", "torch_churn"]
missing = [n for n in want if n not in st]
assert not missing, "checks missing: %s" % missing
assert r["mode"] == "emu", r["mode"]
for prog in ["gpu_probe", "gpu_copy", "gpu_semantics", "gpu_alloc", "mlp_train", "libtrainshim.so", "trainshim"]:
    assert figs["build"][prog] == "built", (prog, figs["build"])
# what runs on the emulator must pass there
for n in ["build", "probe", "semantics", "cupti"]:
    assert st[n] == "PASS", (n, st[n])
for n in ["copies", "demo", "alloc", "vmm", "copy_threads"]:
    assert st[n] == "EMULATED", (n, st[n])
for n in ["hostvmm", "torch_gpt", "torch_cost", "nccl", "torch_gpt_async", "replay", "hook_pair", "torch_mem",
          "torch_churn"]:
    assert st[n] == "NEEDS_DEVICE", (n, st[n])
# the emulator answers cuGetProcAddress with its exports' addresses
assert figs["probe"]["proc_exports"] == "7/7", figs["probe"]
assert figs["semantics"]["bit-identical with/without shim"] == "yes"
assert figs["demo"]["bit-identical losses + weights with/without shim"] == "yes"
assert r["failed"] == [], r["failed"]
assert len(r["need_device"]) == 14, r["need_device"]
print("gpu-check no-GPU mode ok:", len(st), "checks,", len(r["need_device"]), "need a device")
PY
test -s "$out/results.md" || { echo "FAIL: no results.md"; exit 1; }
