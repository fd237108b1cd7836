#!/usr/bin/env bash
# The advice rules of tools/report/report_advice.c on synthetic logs
# (tests/golden/gen_advice_logs.c): each rule fires on the log made to cross
# its threshold, with the figures worked out by hand there, and stays silent
# on the log that stays short of it.  Checked on the JSON report with
# python's json module, and on the text report's ADVICE section.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
${CC:-cc} -std=gnu11 -O1 -Wall -Wextra -Werror -Ishim -o "$T/gen" tests/golden/gen_advice_logs.c || exit 1
"$T/gen" "$T" || exit 1
fail=0
for l in fp32 tf32 headroom full nosteps sync nosync launch long; do
  "$B/trainshim" report --format json "$T/$l.tslog" > "$T/$l.json" 2> "$T/$l.err" || { echo "FAIL: report $l"; fail=1; }
  "$B/trainshim" report "$T/$l.tslog" > "$T/$l.txt" 2>> "$T/$l.err" || { echo "FAIL: report $l (text)"; fail=1; }
  if [ -s "$T/$l.err" ]; then echo "FAIL: $l: stderr:"; cat "$T/$l.err"; fail=1; fi
done
# peaks that promise nothing from TF32 or bf16 (one rate for every precision)
cp "$T/fp32.tslog" "$T/flat.tslog"
TRAINSHIM_PEAK_TFLOPS=100 "$B/trainshim" report --format json "$T/flat.tslog" > "$T/flat.json" || fail=1
TRAINSHIM_PEAK_TFLOPS=100 "$B/trainshim" report "$T/flat.tslog" > "$T/flat.txt" || fail=1
python3 - "$T" <<'PY' || fail=1
import json, math, sys
d = sys.argv[1]
bad = []
GiB = 1 << 30

def advice(name):
    with open(f"{d}/{name}.json") as f:
        j = json.load(f)
    with open(f"{d}/{name}.txt") as f:
        txt = f.read()
    out = {}
    for a in j.get("advice", []):
        if not {"rule", "text", "figures"} <= set(a) <= {"rule", "text", "figures", "sites"}:
            bad.append(f"{name}: advice members {sorted(a)}")
        if "- " + a["text"] not in txt:
            bad.append(f"{name}: JSON line {a['rule']} not in the text ADVICE section")
        out[a["rule"]] = a
    return out

def near(name, got, want, tol=1e-3):
    if got is None or not math.isclose(got, want, rel_tol=tol):
        bad.append(f"{name}: {got} != {want}")

def fires(log, rule):
    a = advice(log)
    if rule not in a:
        bad.append(f"{log}: rule {rule} did not fire (got {sorted(a)})")
        return {}
    return a[rule]["figures"], a[rule]["text"]

def silent(log, rule):
    a = advice(log)
    if rule in a:
        bad.append(f"{log}: rule {rule} fired: {a[rule]['text']}")

# precision_fp32: all fp32 on an H100 SXM (table: fp32 67, tf32 494.7, bf16 989.4)
f, t = fires("fp32", "precision_fp32") or ({}, "")
near("fp32 share", f.get("fp32_flop_share"), 1.0)
near("fp32 flops", f.get("fp32_flops"), 10 * 2 * (2**30 + 2 * 2**32))
near("speedup tf32", f.get("speedup_tf32"), 494.7 / 67)
near("speedup bf16", f.get("speedup_bf16"), 989.4 / 67)
for s in ("100.0% of GEMM FLOPs", "7.4x shorter as TF32", "14.8x as bf16", "allow_tf32 = True", "bf16 autocast"):
    if s not in t:
        bad.append(f"fp32: text lacks {s!r}: {t}")
silent("tf32", "precision_fp32")
silent("flat", "precision_fp32")
silent("headroom", "precision_fp32")  # its GEMMs are TF32

# memory_headroom: 80 GiB device, 20 GiB held, steps add 10 GiB
f, t = fires("headroom", "memory_headroom") or ({}, "")
near("peak", f.get("peak_reserved_bytes"), 30 * GiB)
near("device", f.get("device_memory_bytes"), 80 * GiB)
near("used", f.get("used_share"), 0.375)
near("held", f.get("held_across_steps_bytes"), 20 * GiB)
near("factor", f.get("batch_factor"), (0.9 * 80 - 20) / 10)
for s in ("30.00 GiB of 80.00 GiB (37.5%)", "about 5.2x larger"):
    if s not in t:
        bad.append(f"headroom: text lacks {s!r}: {t}")
silent("full", "memory_headroom")
silent("nosteps", "memory_headroom")

# host_sync: one 4-byte pageable D2H copy of 2 ms per step, 9 full steps
f, t = fires("sync", "host_sync") or ({}, "")
near("syncs per step", f.get("syncs_per_step"), 1.0)
near("steps", f.get("steps"), 9)
near("wait per step", f.get("host_wait_ns_per_step"), 2e6)
near("bytes", f.get("bytes_per_sync"), 4)
if "1.0 host synchronizations per step" not in t or "2.000 ms" not in t:
    bad.append(f"sync: text: {t}")
silent("nosync", "host_sync")
silent("fp32", "host_sync")

# launch_bound: 400 kernels of 10 us, 10 us apart
f, t = fires("launch", "launch_bound") or ({}, "")
near("idle share", f.get("short_gap_idle_share"), 399 * 10 / (400 * 10 + 399 * 10))
near("gaps", f.get("short_gaps"), 399)
near("kernels", f.get("kernels"), 400)
near("mean", f.get("mean_kernel_ns"), 10000)
if "CUDA graphs" not in t or "reduce-overhead" not in t:
    bad.append(f"launch: text lacks the fix: {t}")
silent("long", "launch_bound")
silent("fp32", "launch_bound")

for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "PASS: advice rules fire on their logs with the hand-worked figures and stay silent on the others"
exit $fail
