#!/usr/bin/env bash
# GPU TIMELINE analysis on exact numbers: tests/golden/gen_gpu_log.c writes a
# log with known CUPTI records (overlapping kernels on two streams, two
# devices, an unnamed kernel, an invalid one, a drifted second clock pair);
# the committed copy must match a fresh generation, the report's text and
# JSON must match tests/golden/report_gpu.{txt,json}, and the JSON's numbers
# must be the ones worked out by hand in gen_gpu_log.c.  The threshold can
# be overridden at report time; the chrome trace gets one GPU track per
# (device, stream); a log cut at any offset still reports.
#   UPDATE_GOLDEN=1 bash tests/integration/test_cupti_report.sh  regenerates.
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
  cp "$T/gpu.tslog" "$G/gpu.tslog"
  "$B/trainshim" report "$G/gpu.tslog" > "$G/report_gpu.txt"
  "$B/trainshim" report --format json "$G/gpu.tslog" > "$G/report_gpu.json"
  echo "golden GPU files regenerated in $G"
fi
cmp -s "$T/gpu.tslog" "$G/gpu.tslog" || bad "$G/gpu.tslog differs from a fresh generation (format drift?)"
"$B/trainshim" report "$G/gpu.tslog" > "$T/r.txt" 2> "$T/err" || bad "text report failed: $(cat "$T/err")"
"$B/trainshim" report --format json "$G/gpu.tslog" > "$T/r.json" 2> "$T/err" || bad "JSON report failed: $(cat "$T/err")"
diff -u "$G/report_gpu.txt" "$T/r.txt" || bad "text report differs from $G/report_gpu.txt"
diff -u "$G/report_gpu.json" "$T/r.json" || bad "JSON report differs from $G/report_gpu.json"
TRAINSHIM_IDLE_GAP_US=4500 "$B/trainshim" report --format json "$G/gpu.tslog" > "$T/r45.json" || bad "report with a threshold failed"
"$B/trainshim" export --type chrome-trace "$G/gpu.tslog" -o "$T/trace.json" || bad "chrome-trace export failed"

python3 - "$T/r.json" "$T/r45.json" "$T/trace.json" <<'PY' || fail=1
import json, sys
MS = 1_000_000
rep = json.load(open(sys.argv[1]))
g = rep["gpu"]
bad = []
def chk(name, got, exp):
    if got != exp: bad.append(f"{name} = {got!r}, want {exp!r}")
chk("unknown_records", rep["run"]["unknown_records"], 0)
chk("status", g["status"], "complete")
chk("threshold_ns (the run's TRAINSHIM_IDLE_GAP_US)", g["threshold_ns"], 2 * MS)
chk("run_ns", g["run_ns"], 100 * MS)
chk("busy_ns", g["busy_ns"], 41 * MS)
chk("busy_share", g["busy_share"], 0.41)
chk("kernel_ns", g["kernel_ns"], 44 * MS)
chk("copy_ns", g["copy_ns"], 3 * MS)
chk("kernel_count (the invalid one left out)", g["kernel_count"], 6)
chk("dropped_records", g["dropped_records"], 7)
chk("first/last activity", (g["first_activity_ns"], g["last_activity_ns"]), (10 * MS, 64 * MS))
chk("idle gaps", [(x["start_ns"], x["duration_ns"]) for x in g["idle_gaps"]],
    [(26 * MS, 4 * MS), (35 * MS, 5 * MS), (60 * MS, 3 * MS)])
chk("idle_gap_total_ns", g["idle_gap_total_ns"], 12 * MS)
chk("longest", (g["longest_idle_gap_ns"], g["longest_idle_gap_at_ns"]), (5 * MS, 35 * MS))
d = {x["device"]: x for x in g["devices"]}
chk("devices", sorted(d), [0, 1])
chk("device 0 busy", d[0]["busy_ns"], 36 * MS)
chk("device 0 gaps", [(x["start_ns"], x["duration_ns"]) for x in d[0]["idle_gaps"]], [(26 * MS, 14 * MS), (60 * MS, 3 * MS)])
chk("device 1", (d[1]["busy_ns"], d[1]["idle_gap_count"]), (5 * MS, 0))
chk("kernels", [(k["name"], k["calls"], k["gpu_ns"]) for k in g["kernels"]],
    [("ampere_sgemm_128x64_nn", 2, 20 * MS), ("_Z9layernormPfi", 2, 15 * MS), ("_Z7softmaxPf", 1, 8 * MS), ("kernel#0", 1, MS)])
chk("copies", [(c["kind"], c["host"], c["bytes"]) for c in g["copies"]],
    [("HtoD", "pageable", 1000), ("DtoH", "pinned", 4096), ("DtoD", "device", 2048)])
chk("gemm_gpu_time", g["gemm_gpu_time"], {"compute_source": "sampled events", "cupti_gemm_kernels": 2, "cupti_gemm_ns": 20 * MS})
if len(g["advice"]) != 1 or "GPU idle 12% of the run in 3 gaps over 2 ms (longest 5.0 ms at 0.035 s)" not in g["advice"][0]["text"]:
    bad.append(f"advice {g['advice']}")
g45 = json.load(open(sys.argv[2]))["gpu"]
chk("threshold from the report's environment", (g45["threshold_ns"], g45["idle_gap_count"]), (4_500_000, 1))
# one 5 ms gap is 5% of the run: exactly at the advice bar, so advised
chk("5% idle in gaps", (g45["idle_gap_share"], len(g45["advice"])), (0.05, 1))
tr = json.load(open(sys.argv[3]))["traceEvents"]
tracks = {e["tid"]: e["args"]["name"] for e in tr if e.get("ph") == "M" and e.get("name") == "thread_name" and e["tid"] >= 2000}
chk("GPU tracks", sorted(tracks.values()), ["GPU 0 stream 7", "GPU 0 stream 8", "GPU 1 stream 9"])
sl = [e for e in tr if e.get("cat") in ("gpu_kernel", "gpu_copy")]
chk("GPU slices", len(sl), 9)
first = min(sl, key=lambda e: e["ts"])
# the run starts at the header's wall time; the first GPU slice 10 ms later (the clock pairing applied)
chk("first slice", (first["name"], round(first["ts"]), round(first["dur"])), ("ampere_sgemm_128x64_nn", 10000, 10000))
if bad:
    print("FAIL: " + "\n  ".join(bad)); sys.exit(1)
PY

# a log cut anywhere in the GPU records still reports, and the JSON parses
size=$(stat -c %s "$G/gpu.tslog")
mkdir "$T/cuts"
for ((cut = 16; cut < size; cut += 8)); do
  head -c "$cut" "$G/gpu.tslog" > "$T/cut.tslog"
  "$B/trainshim" report --format json "$T/cut.tslog" > "$T/cuts/$cut.json" 2>/dev/null || { bad "report of the log cut at $cut failed"; break; }
  "$B/trainshim" report "$T/cut.tslog" > /dev/null 2>&1 || { bad "text report of the log cut at $cut failed"; break; }
done
python3 - "$T"/cuts/*.json <<'PY' || bad "a cut log's JSON does not parse or lacks gpu"
import json, sys
for f in sys.argv[1:]:
    json.load(open(f))["gpu"]
PY
[ $fail = 0 ] && echo "test_cupti_report: ok"
exit $fail
