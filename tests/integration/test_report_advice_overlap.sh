#!/usr/bin/env bash
# The advice rules of tools/report/report_advice_overlap.c on synthetic logs
# (tests/golden/gen_advice_logs.c OUTDIR overlap): fragmentation,
# comm_overlap, mfu_hfu and numa each fire on the log made to cross their
# threshold, with the figures worked out by hand there, and stay silent on
# the log that stays short of it.  Checked on the JSON report with python's
# json module, and on the text report's ADVICE section.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
${CC:-cc} -std=gnu11 -O1 -Wall -Wextra -Werror -Ishim -o "$T/gen" tests/golden/gen_advice_logs.c || exit 1
"$T/gen" "$T" overlap || exit 1
fail=0
for l in frag frag_sizes frag_async frag_plain comm_serial comm_overlap comm_otherdev recompute norecompute numa numa_match; do
  "$B/trainshim" report --format json "$T/$l.tslog" > "$T/$l.json" 2> "$T/$l.err" || { echo "FAIL: report $l"; fail=1; }
  "$B/trainshim" report "$T/$l.tslog" > "$T/$l.txt" 2>> "$T/$l.err" || { echo "FAIL: report $l (text)"; fail=1; }
  if [ -s "$T/$l.err" ]; then echo "FAIL: $l: stderr:"; cat "$T/$l.err"; fail=1; fi
done
python3 - "$T" <<'PY' || fail=1
import json, math, sys
d = sys.argv[1]
bad = []
MiB = 1 << 20

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
    if got is None or not math.isclose(got, want, rel_tol=tol, abs_tol=1e-12):
        bad.append(f"{name}: {got} != {want}")

def fires(log, rule, *words):
    a = advice(log)
    if rule not in a:
        bad.append(f"{log}: rule {rule} did not fire (got {sorted(a)})")
        return {}
    for w in words:
        if w not in a[rule]["text"]:
            bad.append(f"{log}: {rule} text lacks {w!r}: {a[rule]['text']}")
    return a[rule]["figures"]

def silent(log, rule):
    a = advice(log)
    if rule in a:
        bad.append(f"{log}: rule {rule} fired: {a[rule]['text']}")

# fragmentation: 82 MiB held, 40 MiB of free segments released, 100 MiB retried 2 ms later
for log in ("frag", "frag_sizes"):
    f = fires(log, "fragmentation", "1 time(s)", "held 82.00 MiB", "freed 40.00 MiB", "at most 42.00 MiB allocated",
              "retried 100.00 MiB", "2.000 ms", "expandable_segments:True", "backend:cudaMallocAsync (trainshim's page pool")
    near(f"{log} flushes", f.get("flushes"), 1)
    near(f"{log} served", f.get("retries_served"), 1)
    near(f"{log} released", f.get("released_bytes"), 40 * MiB)
    near(f"{log} reserved", f.get("reserved_at_first_bytes"), 82 * MiB)
    near(f"{log} request", f.get("requested_at_first_bytes"), 100 * MiB)
    near(f"{log} share", f.get("released_share_at_first"), 40 / 82)
    near(f"{log} time", f.get("flush_host_ns"), 2e6)
silent("frag_async", "fragmentation")
silent("frag_plain", "fragmentation")
silent("recompute", "fragmentation")

# comm_overlap: 10 NCCL kernels of 2 ms after the compute kernel, span 100 ms
f = fires("comm_serial", "comm_overlap", "100.0% of NCCL kernel time", "20.000 of 20.000 ms", "20.0% of the GPU",
          "1.0 collectives per step", "bucket_cap_mb", "side stream")
near("exposed share", f.get("exposed_share"), 1.0)
near("exposed", f.get("exposed_ns"), 20e6)
near("nccl", f.get("nccl_kernel_ns"), 20e6)
near("kernels", f.get("nccl_kernels"), 10)
near("span share", f.get("exposed_span_share"), 0.2)
near("per step", f.get("collectives_per_step"), 1.0)
silent("comm_overlap", "comm_overlap")
f = fires("comm_otherdev", "comm_overlap", "100.0% of NCCL kernel time")
near("other device: exposed share", f.get("exposed_share"), 1.0)
silent("recompute", "comm_overlap")

# mfu_hfu: 2 of 8 equal-FLOP GEMMs per step are recomputed; 10 ms steps at the TF32 peak
X = 2 * 4096 * 8192 * 1024
hfu = 8 * X / (494.7e12 * 0.010)
f = fires("recompute", "mfu_hfu", "25.0% of each step's GEMM FLOPs (2 GEMMs)",
          f"HFU {100 * hfu:.1f}%, MFU {75 * hfu:.1f}%", "torch.utils.checkpoint")
near("share", f.get("recompute_flop_share"), 0.25)
near("gemms", f.get("recomputed_gemms_per_step"), 2)
near("flops", f.get("recomputed_flops_per_step"), 2 * X)
near("hfu", f.get("hfu"), hfu)
near("mfu", f.get("mfu"), 0.75 * hfu)
silent("norecompute", "mfu_hfu")
silent("comm_serial", "mfu_hfu")

# numa: GPU 0 on node 1, the process may run on CPU 0 too
f = fires("numa", "numa", "GPU 0 is on NUMA node 1", "CPUs 0 off it", "numactl --cpunodebind=1 --membind=1")
near("device", f.get("device"), 0)
near("node", f.get("gpu_node"), 1)
near("off cpus", f.get("off_node_cpus"), 1)
near("memory", f.get("memory_off_node"), 1)
near("launcher", f.get("launcher_excluded_node"), 0)
silent("numa_match", "numa")

for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "PASS: fragmentation, comm_overlap, mfu_hfu and numa fire on their logs with the hand-worked figures and stay silent on the others"
exit $fail
