#!/usr/bin/env bash
# COMPUTE's GPU time from CUPTI: test_compute_cupti (12 GEMMs of 4 known
# shapes through cuBLAS and cuBLASLt on two streams) runs under the shim with
# TRAINSHIM_CUPTI=1 and TRAINSHIM_FLOP_SAMPLE=0 (no events at all).  The
# report's JSON must say source "cupti", every GEMM matched to its kernel,
# a GPU time > 0 for every shape, the timed totals equal to the GEMM kernels'
# time in the GPU TIMELINE, and achieved TFLOP/s from all of them.  With
# CUPTI off and every GEMM sampled, the times come from events as before
# (no gpu_time_source in the JSON: logs without CUPTI report unchanged); with
# CUPTI off and no sampling, nothing is timed.
set -u
B=${B:-build}
prog=$B/tests/integration/test_compute_cupti
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
run() { # name, then environment assignments
  local n=$1; shift
  env "$@" TRAINSHIM_LOG="$tmp/$n.log" LD_PRELOAD="$shim" "$prog" > "$tmp/$n.out" 2> "$tmp/$n.err" ||
    { echo "FAIL: run $n failed"; cat "$tmp/$n.out" "$tmp/$n.err"; exit 1; }
  "$tool" report --format json "$tmp/$n.log" > "$tmp/$n.json" 2> "$tmp/$n.rerr" || { echo "FAIL: report $n failed"; cat "$tmp/$n.rerr"; exit 1; }
  "$tool" report "$tmp/$n.log" > "$tmp/$n.txt" 2>&1 || { echo "FAIL: text report $n failed"; exit 1; }
}
run cupti TRAINSHIM_CUPTI=1 TRAINSHIM_FLOP_SAMPLE=0
run events TRAINSHIM_FLOP_SAMPLE=1
run none TRAINSHIM_FLOP_SAMPLE=0
python3 - "$tmp" <<'PY' || fail=1
import json, sys, os
t = sys.argv[1]
bad = []
def chk(name, got, exp):
    if got != exp: bad.append(f"{name} = {got!r}, want {exp!r}")
calls = int(open(os.path.join(t, "cupti.out")).read().split("calls=")[1])
shapes_want = {(64, 32, 16, 1), (128, 64, 32, 1), (32, 32, 32, 4), (16, 16, 16, 2)}

rep = json.load(open(os.path.join(t, "cupti.json")))
c, g = rep["compute"], rep["gpu"]
chk("cupti: gemm_calls", c["gemm_calls"], calls)
chk("cupti: gpu_time_source", c.get("gpu_time_source"), "cupti")
chk("cupti: gpu_time_matched", c.get("gpu_time_matched"), calls)
chk("cupti: timed_calls", c["timed_calls"], calls)
chk("cupti: timed_flops", c["timed_flops"], c["gemm_flops"])
if not c["timed_gpu_ns"] > 0: bad.append("cupti: no GPU time")
if not (c["achieved_tflops"] or 0) > 0: bad.append(f"cupti: achieved_tflops {c['achieved_tflops']}")
sh = {(s["m"], s["n"], s["k"], s["batch"]): s for s in c["shapes"]}
chk("cupti: shapes", set(sh), shapes_want)
for k, s in sh.items():
    chk(f"cupti: shape {k} timed_calls", s["timed_calls"], s["calls"])
    if not s["timed_gpu_ns"] > 0: bad.append(f"cupti: shape {k} has no GPU time")
chk("cupti: sum of shape times", sum(s["timed_gpu_ns"] for s in c["shapes"]), c["timed_gpu_ns"])
gg = g["gemm_gpu_time"]
chk("gpu: compute_source", gg["compute_source"], "cupti")
chk("gpu: cupti_gemm_kernels", gg["cupti_gemm_kernels"], calls)
chk("gpu: matched_gemms", gg.get("matched_gemms"), calls)
chk("gpu: matched ns = compute's", gg.get("matched_gemm_ns"), c["timed_gpu_ns"])
chk("gpu: kernel time = compute's", gg["cupti_gemm_ns"], c["timed_gpu_ns"])
names = [k["name"] for k in g["kernels"]]
for want in ("sm80_xmma_sgemm_128x128x32_stage3_warpsize2x2x1_nn", "sm80_xmma_hgemm_128x128x32_stage3_warpsize2x2x1_tn",
             "sm80_xmma_sgemm_128x128x32_stage3_warpsize2x2x1_nt", "ampere_sgemm_128x64_nn"):
    if want not in names: bad.append(f"kernel {want} missing from {names}")
text = open(os.path.join(t, "cupti.txt")).read()
if f"GPU time source     CUPTI kernels ({calls} of {calls} GEMMs matched)" not in text: bad.append("text: no CUPTI source line")
if f"COMPUTE uses CUPTI kernels: {calls} of {calls} GEMMs matched" not in text: bad.append("text: GPU TIMELINE GEMM line")

ev = json.load(open(os.path.join(t, "events.json")))["compute"]
chk("events: timed_calls (every call sampled)", ev["timed_calls"], calls)
chk("events: no gpu_time_source without CUPTI", "gpu_time_source" in ev, False)
if "GPU time source" in open(os.path.join(t, "events.txt")).read(): bad.append("events: text has a source line without CUPTI")
no = json.load(open(os.path.join(t, "none.json")))["compute"]
chk("none: timed_calls", no["timed_calls"], 0)
chk("none: achieved", no["achieved_tflops"], None)
if bad:
    print("FAIL: " + "\n  ".join(bad)); sys.exit(1)
PY
for n in cupti events none; do
  cmp -s "$tmp/$n.out" "$tmp/cupti.out" || { echo "FAIL: program output differs ($n)"; fail=1; }
  if grep -q "trainshim: " "$tmp/$n.err"; then echo "FAIL: messages in run $n:"; cat "$tmp/$n.err"; fail=1; fi
done
[ $fail = 0 ] && echo "test_compute_cupti: ok"
exit $fail
