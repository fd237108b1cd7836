#!/usr/bin/env bash
# FLOP accounting through every GEMM entry point: test_compute_flops runs
# under the shim (every call timed, one in 4, none); the report's JSON must
# hold exactly the calls, failed calls, FLOPs and misaligned FLOPs the program
# worked out from its own call statuses, the precision classes, and sampled
# GPU time.  Nested cuBLAS -> cuBLASLt calls must count once (the totals would
# be larger otherwise).  A GEMM captured into a graph counts once and is
# never timed (the graph still instantiates and runs).  The program's output is the same with and without
# the shim.
set -u
B=${B:-build}
prog=$B/tests/integration/test_compute_flops
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
"$prog" > "$tmp/plain" 2>/dev/null || { echo "FAIL: plain run failed"; cat "$tmp/plain"; exit 1; }
fail=0
for sample in 1 4 0; do
  TRAINSHIM_LOG="$tmp/s$sample.log" TRAINSHIM_FLOP_SAMPLE=$sample LD_PRELOAD="$shim" "$prog" > "$tmp/out$sample" 2> "$tmp/err$sample" \
    || { echo "FAIL: run under the shim failed (sample $sample)"; cat "$tmp/out$sample" "$tmp/err$sample"; exit 1; }
  diff "$tmp/plain" "$tmp/out$sample" > /dev/null || { echo "FAIL: output differs under the shim"; diff "$tmp/plain" "$tmp/out$sample"; fail=1; }
  "$tool" report --format json "$tmp/s$sample.log" > "$tmp/r$sample.json" 2> "$tmp/rerr" || { echo "FAIL: report failed"; cat "$tmp/rerr"; exit 1; }
  "$tool" report "$tmp/s$sample.log" > "$tmp/r$sample.txt" 2>&1 || { echo "FAIL: text report failed"; exit 1; }
  python3 - "$tmp/r$sample.json" "$tmp/out$sample" "$sample" <<'PY' || fail=1
import json, sys
rep = json.load(open(sys.argv[1]))
want = dict(kv.split("=") for kv in open(sys.argv[2]).read().strip().splitlines()[-1].split()[1:])
want = {k: int(v) for k, v in want.items()}
sample = int(sys.argv[3])
c = rep["compute"]
bad = []
def chk(name, got, exp):
    if got != exp: bad.append(f"{name} = {got}, want {exp}")
chk("gemm_calls", c["gemm_calls"], want["calls"])
chk("gemm_failed_calls", c["gemm_failed_calls"], want["failed"])
chk("gemm_flops", c["gemm_flops"], want["flops"])
chk("misaligned.flops", c["misaligned"]["flops"], want["misaligned"])
prec = {p["precision"]: p for p in c["by_precision"]}
chk("tf32 flops", prec.get("tf32", {}).get("flops"), 2 * 8 * 8 * 8)
chk("fp64 flops", prec.get("fp64", {}).get("flops"), 2 * (4*4*4 + 3*5*7 + 5*3*2*2 + 3*3*3*2))
chk("fp16 flops", prec.get("fp16", {}).get("flops"), 2 * (12*8*16 + 16*8*8 + 8*8*8*2 + 8*4*8*2 + 8*8*4*2 + 24*16*10))
shapes = {(s["m"], s["n"], s["k"], s["batch"]): s for s in c["shapes"]}
lt = shapes.get((4, 4, 6, 1))
if not lt or lt["transa"] != 1: bad.append(f"transposed cublasLtMatmul shape 4x4x6 missing or transa wrong: {lt}")
mis = shapes.get((24, 16, 10, 1))
if not mis or mis["pad"] != "k 10->16": bad.append(f"GemmEx fp16 24x16x10 pad hint: {mis}")
cap = shapes.get((8, 8, 24, 1))
if not cap or cap["calls"] != 1: bad.append(f"captured GEMM 8x8x24 not counted once: {cap}")
elif cap["timed_calls"] != 0: bad.append("a GEMM on a capturing stream was timed")
if "cuBLAS" not in c["counted"]: bad.append("the report does not say which FLOPs are counted")
if sample == 1:
    if not (1 <= c["timed_calls"] <= c["gemm_calls"]): bad.append(f"timed_calls {c['timed_calls']} with every call sampled")
    if c["timed_gpu_ns"] <= 0 or c["achieved_tflops"] is None: bad.append("no GPU time measured")
    if c["peak_source"] != "table: H100 SXM": bad.append(f"peak_source {c['peak_source']}")
    if c["gemm_efficiency"] is None: bad.append("gemm_efficiency null with samples and a peak")
elif sample == 4:
    # one call in 4 per thread (failed and captured calls advance the count too)
    if not (1 <= c["timed_calls"] <= (want["calls"] + want["failed"]) // 4):
        bad.append(f"timed_calls {c['timed_calls']} with one call in 4 sampled")
else:
    chk("timed_calls (FLOP_SAMPLE=0)", c["timed_calls"], 0)
    if c["achieved_tflops"] is not None: bad.append("achieved_tflops without samples")
for b in bad: print(f"FAIL (FLOP_SAMPLE={sample}): {b}")
sys.exit(1 if bad else 0)
PY
  grep -q "^== COMPUTE ==" "$tmp/r$sample.txt" || { echo "FAIL: no COMPUTE section in the text report"; fail=1; }
  grep -q "^== ADVICE ==" "$tmp/r$sample.txt" || { echo "FAIL: no ADVICE (misaligned GEMMs) in the text report"; fail=1; }
done
[ $fail = 0 ] && echo "ok: exact GEMM calls and FLOPs through every entry point, nested calls counted once, sampled GPU time"
exit $fail
