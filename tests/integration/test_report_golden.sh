#!/usr/bin/env bash
# Golden test of `trainshim report`: tests/golden/gen_golden_logs.c writes
# small deterministic logs; the committed copies under tests/golden/ must be
# byte-identical to a fresh generation (the format did not drift), and the
# report's text and JSON outputs must match the committed expectations.  The
# JSON is also parsed by python3 and its contract fields checked against
# values worked out by hand from the generator.
#   UPDATE_GOLDEN=1 bash tests/integration/test_report_golden.sh
# regenerates the committed logs and outputs (review the diff!).
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
G=tests/golden
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
${CC:-cc} -std=gnu11 -O1 -Wall -Wextra -Werror -Ishim -o "$T/gen" "$G/gen_golden_logs.c" || exit 1
mkdir -p "$T/logs"
"$T/gen" "$T/logs" || exit 1

LOGS="rank0 rank1 truncated torch_pool queued_gemms"
# name | arguments
CASES=(
  "report_rank0.txt|$G/rank0.tslog"
  "report_rank0.json|--format json $G/rank0.tslog"
  "report_ranks.txt|$G/rank0.tslog $G/rank1.tslog"
  "report_ranks.json|--format=json $G/rank0.tslog $G/rank1.tslog"
  "report_truncated.txt|$G/truncated.tslog"
  "report_truncated.json|--format json $G/truncated.tslog"
  "report_torch_pool.txt|$G/torch_pool.tslog"
  "report_torch_pool.json|--format json $G/torch_pool.tslog"
  "report_queued_gemms.txt|$G/queued_gemms.tslog"
  "report_queued_gemms.json|--format json $G/queued_gemms.tslog"
)

if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
  for l in $LOGS; do cp "$T/logs/$l.tslog" "$G/$l.tslog"; done
  for c in "${CASES[@]}"; do
    out=${c%%|*}; args=${c#*|}
    # shellcheck disable=SC2086
    "$B/trainshim" report $args > "$G/$out" 2>/dev/null
  done
  echo "golden files regenerated in $G"
fi

for l in $LOGS; do
  cmp -s "$T/logs/$l.tslog" "$G/$l.tslog" || bad "$G/$l.tslog differs from a fresh generation (format drift?)"
done

for c in "${CASES[@]}"; do
  out=${c%%|*}; args=${c#*|}
  # shellcheck disable=SC2086
  "$B/trainshim" report $args > "$T/$out" 2> "$T/$out.err"; rc=$?
  [ $rc = 0 ] || bad "report $args: exit $rc: $(cat "$T/$out.err")"
  diff -u "$G/$out" "$T/$out" > "$T/$out.diff" || { bad "report $args differs from $G/$out:"; head -40 "$T/$out.diff"; }
done
grep -q "warning: $G/truncated.tslog: truncated at offset" "$T/report_truncated.txt.err" ||
  bad "no truncation warning on stderr: $(cat "$T/report_truncated.txt.err")"

# The JSON contract, checked with an independent parser against hand-computed values.
python3 - "$T" <<'EOF' || fail=1
import json, sys
t = sys.argv[1]
MiB = 1 << 20
errs = []
def eq(what, got, want):
    if got != want:
        errs.append(f"{what}: {got!r}, want {want!r}")
r0 = json.load(open(f"{t}/report_rank0.json", encoding="utf-8"))
eq("run.pid", r0["run"]["pid"], 1000)
eq("run.command", r0["run"]["command"], "python train.py --epochs 2")
eq("run.argv", r0["run"]["argv"], ["python", "train.py", "--epochs", "2"])
eq("run.complete", r0["run"]["complete"], True)
eq("run.rank", r0["run"]["rank"], 0)
eq("run.duration_ns", r0["run"]["duration_ns"], 100_000_000)
m = r0["memory"]
eq("peak_allocated_bytes (needs time order)", m["peak_allocated_bytes"], 7 * MiB)
eq("peak_reserved_bytes", m["peak_reserved_bytes"], 7 * MiB)
eq("alloc_calls", m["alloc_calls"], 6)
eq("alloc_failed", m["alloc_failed"], 1)
eq("free_calls", m["free_calls"], 4)
eq("free_unknown_pointer", m["free_unknown_pointer"], 1)
eq("live_at_end_bytes", m["live_at_end_bytes"], 3000)
eq("histogram", [(b["min_bytes"], b["count"]) for b in m["size_histogram"]],
   [(0, 1), (2048, 1), (MiB, 1), (2 * MiB, 1), (4 * MiB, 1)])
c = r0["copies"]
eq("h2d_bytes", c["h2d_bytes"], 3 * MiB)
eq("h2d_calls", c["h2d_calls"], 3)
eq("d2h_bytes", c["d2h_bytes"], 4 * MiB)
eq("d2d_bytes", c["d2d_bytes"], 2 * MiB)
eq("h2d_pageable_bytes", c["h2d_pageable_bytes"], 1 * MiB)
eq("d2h_pageable_bytes", c["d2h_pageable_bytes"], 0)
eq("host_time_ns", c["host_time_ns"], 159200)
eq("failed copies", c["failed_calls"], 1)
eq("errors", [(e["api"], e["code"], e["count"]) for e in r0["errors"]],
   [("cudaMalloc", 2, 1), ("cudaMemcpy", 1, 1)])

rr = json.load(open(f"{t}/report_ranks.json", encoding="utf-8"))
eq("ranks", [r["run"]["rank"] for r in rr["ranks"]], [0, 1])
r1 = rr["ranks"][1]
eq("rank1 argv", r1["run"]["argv"], ["python", "-c", 'print("a\\b")\tx', "caf\u00e9", "bad\ufffd"])
eq("rank1 unknown records", r1["run"]["unknown_records"], 1)
eq("rank1 peak", r1["memory"]["peak_allocated_bytes"], 8 * MiB + (1 << 30))
eq("rank1 errors", [(e["api"], e["code"]) for e in r1["errors"]], [("cudaFree", 400)])
tot = rr["total"]
eq("total.logs", tot["logs"], 2)
eq("total peak (sum)", tot["memory"]["peak_allocated_bytes"], 7 * MiB + 8 * MiB + (1 << 30))
eq("total max rank peak", tot["memory"]["max_rank_peak_allocated_bytes"], 8 * MiB + (1 << 30))
eq("total alloc_calls", tot["memory"]["alloc_calls"], 8)
eq("total free_calls", tot["memory"]["free_calls"], 5)
eq("total h2d", tot["copies"]["h2d_bytes"], 11 * MiB)
eq("total h2d pageable", tot["copies"]["h2d_pageable_bytes"], 9 * MiB)
eq("total d2h pageable", tot["copies"]["d2h_pageable_bytes"], 0)

rt = json.load(open(f"{t}/report_truncated.json", encoding="utf-8"))
eq("truncated.complete", rt["run"]["complete"], False)
eq("truncated.truncated", rt["run"]["truncated"], True)
if not (rt["run"]["note"] or "").startswith("truncated at offset %d" % rt["run"]["stopped_at_offset"]):
    errs.append("truncated note: %r" % rt["run"]["note"])
eq("truncated: free of the cut record not seen", rt["memory"]["free_calls"], 3)

# torch's default allocator on trainshim's pool: reserved never below
# allocated; pinned host memory apart; statuses apart from errors
tp = json.load(open(f"{t}/report_torch_pool.json", encoding="utf-8"))
m = tp["memory"]
eq("pool: peak allocated (device only)", m["peak_allocated_bytes"], 63 * MiB)
eq("pool: pool's own peak reserved", m["pool_peak_reserved_bytes"], 62 * MiB)
if m["peak_reserved_bytes"] < m["peak_allocated_bytes"]:
    errs.append(f"peak reserved {m['peak_reserved_bytes']} below peak allocated {m['peak_allocated_bytes']}")
eq("pool: pinned host bytes", m["pinned_host_alloc_bytes"], 4 * MiB)
eq("pool: device allocations", m["alloc_calls"], 5 + 1)
eq("pool: errors", [(e["api"], e["code"], e["count"]) for e in tp["errors"]], [("cudaMalloc", 2, 1)])
eq("pool: statuses", [(e["api"], e["code"], e["count"]) for e in tp["statuses"]],
   [("cudaEventQuery", 600, 3), ("cuStreamQuery", 600, 1), ("ncclGroupEnd", 7, 1)])
eq("pool: copy time flagged", tp["copies"]["host_time_includes_waits"], True)
shapes = [(s["m"], s["n"], s["k"], s["transa"], s["transb"], s["timed_calls"]) for s in tp["compute"]["shapes"]]
eq("pool: shapes apart by transposes", shapes, [(512, 64, 512, 0, 1, 0), (512, 64, 512, 0, 0, 0)])
tt = open(f"{t}/report_torch_pool.txt", encoding="utf-8").read()
for want in ("512x64x512 NT", "512x64x512 NN"):
    if want not in tt:
        errs.append(f"text top shapes lack {want!r}")
rows = [l for l in tt.splitlines() if l.startswith("  512x64x512")]
if len(rows) != 2 or not all(l.rstrip().endswith("n/a") for l in rows):
    errs.append(f"untimed shapes must show n/a: {rows}")
if "cudaEventQuery" in tt.split("statuses, not errors")[0]:
    errs.append("cudaEventQuery's not-ready status is listed among the errors")
eq("pool: step plan", m["step_plan"], {"enabled": True, "adopted": 1, "period": 40, "planned_hits": 117,
                                        "planned_misses": 3, "pools_settled": 1, "pools_settling": 0,
                                        "driver_calls_since_settled": 2})
want = "step plan           period 40 allocations, 97.5% of 120 at their planned address; settled, 2 driver calls since"
if want not in tt.splitlines():
    errs.append(f"text lacks the step plan line {want!r}")

# 31 GEMMs queued without a sync: no steps, MFU on the copy that waited (3.31%), never above 100%
qg = json.load(open(f"{t}/report_queued_gemms.json", encoding="utf-8"))["compute"]
eq("queued: steps", qg["steps"], 0)
eq("queued: mfu basis", qg["mfu_basis"], "first_gemm_to_wait")
ideal_ns = 31 * 2 * 1024**3 / 67e3
if qg["mfu"] is None or abs(qg["mfu"] - ideal_ns / 30e6) > 1e-6:
    errs.append(f"queued: mfu {qg['mfu']}, want {ideal_ns / 30e6}")
for e in errs:
    print("FAIL:", e)
sys.exit(1 if errs else 0)
EOF

# errors: a file that is not a log, a missing file, no arguments
printf 'hello world, not a log\n' > "$T/foreign.txt"
"$B/trainshim" report "$T/foreign.txt" > /dev/null 2> "$T/err"; rc=$?
[ $rc = 1 ] && grep -q "$T/foreign.txt: not a trainshim log (bad magic at offset 0)" "$T/err" ||
  bad "foreign file: exit $rc, '$(cat "$T/err")'"
"$B/trainshim" report "$T/missing.log" > /dev/null 2> "$T/err"; rc=$?
[ $rc = 1 ] && grep -q "missing.log: cannot open" "$T/err" || bad "missing file: exit $rc, '$(cat "$T/err")'"
"$B/trainshim" report > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || bad "no arguments: exit $rc"
"$B/trainshim" report --format yaml "$G/rank0.tslog" > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || bad "bad format: exit $rc"

[ $fail = 0 ] && echo "ok"
exit $fail
