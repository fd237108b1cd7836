#!/usr/bin/env bash
# COMPUTE's GPU time of GEMMs from CUPTI kernels, on exact numbers:
# tests/golden/gen_gpu_log.c also writes gpu_gemm.tslog (GEMM calls on two
# stream handles and their kernels, one kernel that starts before its call
# returned, a failed call, a call whose kernel was lost, a GEMM kernel nobody
# called, a sampled event time that CUPTI overrides, and a handle whose
# stream only the kernel names tell apart); the committed copy must match a
# fresh generation, the report's text and JSON must match
# tests/golden/report_gpu_gemm.{txt,json}, and the JSON's numbers must be the
# ones worked out by hand in gen_gpu_log.c.
#   UPDATE_GOLDEN=1 bash tests/integration/test_cupti_gemm_golden.sh  regenerates.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
G=tests/golden
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
${CC:-cc} -std=gnu11 -O1 -Wall -Wextra -Werror -Ishim -o "$T/gen" "$G/gen_gpu_log.c" || exit 1
"$T/gen" "$T" || exit 1
if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$T/gpu_gemm.tslog" "$G/gpu_gemm.tslog"
  "$B/trainshim" report "$G/gpu_gemm.tslog" > "$G/report_gpu_gemm.txt"
  "$B/trainshim" report --format json "$G/gpu_gemm.tslog" > "$G/report_gpu_gemm.json"
  echo "golden GEMM GPU files regenerated in $G"
fi
cmp -s "$T/gpu_gemm.tslog" "$G/gpu_gemm.tslog" || bad "$G/gpu_gemm.tslog differs from a fresh generation (format drift?)"
"$B/trainshim" report "$G/gpu_gemm.tslog" > "$T/r.txt" 2> "$T/err" || bad "text report failed: $(cat "$T/err")"
"$B/trainshim" report --format json "$G/gpu_gemm.tslog" > "$T/r.json" 2> "$T/err" || bad "JSON report failed: $(cat "$T/err")"
diff -u "$G/report_gpu_gemm.txt" "$T/r.txt" || bad "text report differs from $G/report_gpu_gemm.txt"
diff -u "$G/report_gpu_gemm.json" "$T/r.json" || bad "JSON report differs from $G/report_gpu_gemm.json"
python3 - "$T/r.json" "$T/r.txt" <<'PY' || fail=1
import json, sys
MS = 1_000_000
rep = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
c, g = rep["compute"], rep["gpu"]
bad = []
def chk(name, got, exp):
    if got != exp: bad.append(f"{name} = {got!r}, want {exp!r}")
chk("gemm_calls", c["gemm_calls"], 6)
chk("gemm_failed_calls", c["gemm_failed_calls"], 1)
chk("gpu_time_source", c["gpu_time_source"], "cupti")
chk("gpu_time_matched", c["gpu_time_matched"], 5)
chk("flop_sample", c["flop_sample"], 16)
chk("timed_calls", c["timed_calls"], 5)
chk("timed_gpu_ns (the 50 ms event overridden)", c["timed_gpu_ns"], 15 * MS)
s1 = 2 * 256 * 128 * 64
s2 = 2 * 64 * 64 * 64
chk("timed_flops", c["timed_flops"], 3 * s1 + 2 * s2)
chk("achieved_tflops (6 digits in JSON)", round(c["achieved_tflops"], 6), round((3 * s1 + 2 * s2) / (15 * MS) / 1e3, 6))
sh = {(s["m"], s["n"], s["k"], s["precision"]): s for s in c["shapes"]}
chk("shapes", sorted(sh), [(64, 64, 64, "fp32"), (256, 128, 64, "fp16")])
chk("S1 calls/timed/ns", [sh[(256, 128, 64, "fp16")][k] for k in ("calls", "timed_calls", "timed_gpu_ns")], [4, 3, 12 * MS])
chk("S2 calls/timed/ns", [sh[(64, 64, 64, "fp32")][k] for k in ("calls", "timed_calls", "timed_gpu_ns")], [2, 2, 3 * MS])
chk("gpu.gemm_gpu_time", g["gemm_gpu_time"], {"compute_source": "cupti", "cupti_gemm_kernels": 6, "cupti_gemm_ns": 16 * MS,
                                              "gemm_calls": 6, "matched_gemms": 5, "matched_gemm_ns": 15 * MS})
for line in ("GPU time source     CUPTI kernels (5 of 6 GEMMs matched)",
             "GEMM GPU time   COMPUTE uses CUPTI kernels: 5 of 6 GEMMs matched, 15.000 ms; CUPTI saw 6 kernels named *gemm* taking 16.000 ms"):
    if line not in text: bad.append(f"text lacks: {line}")
if bad:
    print("FAIL: " + "\n  ".join(bad)); sys.exit(1)
PY
[ $fail = 0 ] && echo "test_cupti_gemm_golden: ok"
exit $fail
