#!/usr/bin/env bash
# Step detection, per-step time/FLOPs/MFU and the peak override, from a real
# run: test_compute_steps (one warm-up GEMM, then 6 steps of 3 GEMM shapes,
# each followed by a 3 ms pause) under the shim.  The report must find 6
# steps of period 3 after 1 extra GEMM, the first shown as warm-up, each
# measured step >= 3 ms, per-step FLOPs exact, and per-step MFU equal to
# FLOPs / (time x peak) for the peak given by TRAINSHIM_PEAK_TFLOPS (at report
# time, and as logged by the run).
set -u
B=${B:-build}
prog=$B/tests/integration/test_compute_steps
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
TRAINSHIM_LOG="$tmp/run.log" TRAINSHIM_FLOP_SAMPLE=1 TRAINSHIM_PEAK_TFLOPS=fp32=0.00002 LD_PRELOAD="$shim" "$prog" > "$tmp/out" 2> "$tmp/err" \
  || { echo "FAIL: run under the shim failed"; cat "$tmp/out" "$tmp/err"; exit 1; }
"$tool" report --format json "$tmp/run.log" > "$tmp/run.json" || { echo "FAIL: report failed"; exit 1; }
TRAINSHIM_PEAK_TFLOPS=0.00001 "$tool" report --format json "$tmp/run.log" > "$tmp/override.json" || { echo "FAIL: report failed"; exit 1; }
"$tool" report "$tmp/run.log" > "$tmp/run.txt" || { echo "FAIL: text report failed"; exit 1; }
fail=0
python3 - "$tmp/run.json" "$tmp/override.json" "$tmp/out" <<'PY' || fail=1
import json, sys
steps_want, pause_us, step_flops = [int(x) for x in open(sys.argv[3]).read().split()[1::2]]
bad = []
for path, peak, source in ((sys.argv[1], 2e-5, "(run)"), (sys.argv[2], 1e-5, "(report)")):
    c = json.load(open(path))["compute"]
    d = c["step_detail"]
    if c["steps"] != steps_want: bad.append(f"steps = {c['steps']}, want {steps_want}")
    if d["period_gemms"] != 3: bad.append(f"period {d['period_gemms']}, want 3")
    if d["gemms_before_first_step"] != 1: bad.append(f"{d['gemms_before_first_step']} GEMMs before the first step, want 1")
    if source not in (c["peak_source"] or ""): bad.append(f"peak_source {c['peak_source']!r}, want {source}")
    if abs(c["peak_tflops"]["fp32"] - peak) > 1e-12: bad.append(f"fp32 peak {c['peak_tflops']['fp32']}, want {peak}")
    lst = d["list"]
    if len(lst) != steps_want or lst[0]["phase"] != "warmup" or any(s["phase"] != "steady" for s in lst[1:]):
        bad.append(f"step phases {[s['phase'] for s in lst]}")
    for s in lst:
        if s["flops"] != step_flops: bad.append(f"step {s['index']} FLOPs {s['flops']}, want {step_flops}")
    for s in lst[:-1]:
        t = s["time_ns"]
        if t is None or t < pause_us * 1000: bad.append(f"step {s['index']} time {t} ns < pause {pause_us} us"); continue
        want = s["flops"] / (t * peak * 1e3)
        if abs(s["mfu"] - want) > 1e-6 + 1e-3 * want: bad.append(f"step {s['index']} mfu {s['mfu']}, want {want}")
    if lst[-1]["time_ns"] is not None: bad.append("the last step's end is unknown, yet it has a time")
    ideal = sum(s["flops"] / (peak * 1e3) for s in lst[1:-1]); wall = sum(s["time_ns"] for s in lst[1:-1])
    if abs(c["mfu"] - ideal / wall) > 1e-6 + 1e-3 * ideal / wall: bad.append(f"mfu {c['mfu']}, want {ideal / wall}")
    if c["mfu_basis"] != "steady_steps": bad.append(f"mfu_basis {c['mfu_basis']}")
    if c["gemm_flops"] != 2 * 32 * 32 * 32 + steps_want * step_flops: bad.append(f"gemm_flops {c['gemm_flops']}")
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
grep -q "^steps  *6 (period 3 GEMMs, 1 GEMMs before the first)" "$tmp/run.txt" || { echo "FAIL: text report steps line:"; grep steps "$tmp/run.txt"; fail=1; }
grep -q "warm-up" "$tmp/run.txt" || { echo "FAIL: warm-up step not shown apart"; fail=1; }
grep -q "^steady state " "$tmp/run.txt" || { echo "FAIL: no steady-state line"; fail=1; }
grep -q "^- steady-state GEMM MFU is" "$tmp/run.txt" || { echo "FAIL: no MFU advice grounded in the measured MFU"; fail=1; }
[ $fail = 0 ] && echo "ok: 6 steps of period 3 after a warm-up GEMM, per-step time, FLOPs and MFU, peak override"
exit $fail
