#!/usr/bin/env bash
# The comm_overlap advice on a run's own CUPTI records:
# test_advice_comm_overlap (a compute stream and a communication stream whose
# NCCL-named kernel waits for an event on it) under the shim with
# TRAINSHIM_CUPTI=1.  "serial" (the all-reduce after the whole backward) must
# get the comm_overlap line with every NCCL kernel's time exposed (share 1,
# 5 kernels of at least 4 ms); "overlap" (the all-reduce after the first
# gradients, beside the rest of the backward) must not.
set -u
B=${B:-build}
prog=$B/tests/integration/test_advice_comm_overlap
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
for mode in serial overlap; do
  env TRAINSHIM_CUPTI=1 TRAINSHIM_LOG="$tmp/$mode.log" LD_PRELOAD="$shim" "$prog" $mode > "$tmp/$mode.out" 2> "$tmp/$mode.err" ||
    { echo "FAIL: run $mode failed"; cat "$tmp/$mode.out" "$tmp/$mode.err"; exit 1; }
  "$tool" report --format json "$tmp/$mode.log" > "$tmp/$mode.json" || { echo "FAIL: report $mode"; exit 1; }
  "$tool" report "$tmp/$mode.log" > "$tmp/$mode.txt" || { echo "FAIL: text report $mode"; exit 1; }
done
python3 - "$tmp" <<'PY' || fail=1
import json, sys
t = sys.argv[1]
facts = dict(kv.split("=") for kv in open(f"{t}/serial.out").read().split()[1:])
steps, nccl_ms, compute_ms = int(facts["steps"]), int(facts["nccl_ms"]), int(facts["compute_ms"])
bad = []
def advice(mode):
    a = {x["rule"]: x for x in json.load(open(f"{t}/{mode}.json")).get("advice", [])}
    txt = open(f"{t}/{mode}.txt").read()
    for x in a.values():
        if "- " + x["text"] not in txt:
            bad.append(f"{mode}: {x['rule']} not in the text ADVICE section")
    return a
a = advice("serial")
if "comm_overlap" not in a:
    bad.append(f"serial: no comm_overlap advice: {sorted(a)}")
else:
    f = a["comm_overlap"]["figures"]
    if f["exposed_share"] != 1.0 or f["exposed_ns"] != f["nccl_kernel_ns"]:
        bad.append(f"serial: NCCL time not all exposed: {f}")
    if f["nccl_kernels"] != steps or f["nccl_kernel_ns"] < steps * nccl_ms * 1e6:
        bad.append(f"serial: {f['nccl_kernels']} NCCL kernels, {f['nccl_kernel_ns']} ns (want {steps}, >= {nccl_ms} ms each)")
    if "backward_prefetch" not in a["comm_overlap"]["text"]:  # no steps: the general fix
        bad.append(f"serial: text: {a['comm_overlap']['text']}")
    print("serial:", a["comm_overlap"]["text"])
a = advice("overlap")
if "comm_overlap" in a:
    bad.append(f"overlap: comm_overlap fired: {a['comm_overlap']['text']}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "PASS: comm_overlap fires on serialized NCCL kernels with all their time exposed, and not when they run beside compute"
exit $fail
