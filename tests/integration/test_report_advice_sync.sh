#!/usr/bin/env bash
# The host_sync and input_stall advice rules (tools/report/report_advice_sync.c)
# on synthetic logs (tests/golden/gen_advice_sync_logs.c): each fires with
# the figures worked out by hand there and stays silent on its twin that
# stays short of it; then on the demo's workload (tests/workloads/mlp_train
# under the shim with CUPTI, as scripts/demo.sh runs it) input_stall stays
# silent: its input is generated on the host and copied with the GPU busy.
# Logs cut inside a host sync record, or with a byte of one changed, read up
# to it and say why.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -x "$B/trainshim" ] || { echo "FAIL: $B/trainshim not built"; exit 1; }
${CC:-cc} -std=gnu11 -O1 -Wall -Wextra -Werror -Ishim -o "$T/gen" tests/golden/gen_advice_sync_logs.c || exit 1
"$T/gen" "$T" || exit 1
fail=0
for l in syncs idle stall fed; do
  "$B/trainshim" report --format json "$T/$l.tslog" > "$T/$l.json" 2> "$T/$l.err" || { echo "FAIL: report $l"; fail=1; }
  "$B/trainshim" report "$T/$l.tslog" > "$T/$l.txt" 2>> "$T/$l.err" || { echo "FAIL: report $l (text)"; fail=1; }
  if [ -s "$T/$l.err" ]; then echo "FAIL: $l: stderr:"; cat "$T/$l.err"; fail=1; fi
done
# a log cut inside a host sync record, or with one of its bytes changed,
# reads up to the record before it, with the reason
python3 - "$T" <<'PY' || fail=1
import struct, sys
d = open(f"{sys.argv[1]}/syncs.tslog", "rb").read()
off = 16
while struct.unpack_from("<IH", d, off)[1] != 56:
    off += struct.unpack_from("<I", d, off)[0]
for cut in range(off + 1, off + 56, 5):
    open(f"{sys.argv[1]}/cut{cut - off}.tslog", "wb").write(d[:cut])
b = bytearray(d)
b[off + 40] ^= 0xFF
open(f"{sys.argv[1]}/flip.tslog", "wb").write(bytes(b))
print(off, file=open(f"{sys.argv[1]}/sync_off", "w"))
PY
off=$(cat "$T/sync_off")
for f in "$T"/cut*.tslog "$T/flip.tslog"; do
  "$B/trainshim" report --format json "$f" > "$f.json" 2> "$f.err" || { echo "FAIL: report of $f exited $?"; fail=1; continue; }
  python3 - "$f.json" "$off" <<'PY' || fail=1
import json, sys
run = json.load(open(sys.argv[1]))["run"]
want = ("truncated at offset " if "cut" in sys.argv[1] else "corrupt record at offset ") + sys.argv[2]
if not run["truncated"] or not run["note"].startswith(want):
    print(f"FAIL: {sys.argv[1]}: {run['truncated']} {run['note']!r}, want {want!r}")
    sys.exit(1)
PY
done
# the demo's workload, fewer steps
LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TRAINSHIM_STACKS=16 TRAINSHIM_CUPTI=1 \
  TRAINSHIM_PINNED_COPY_MIN=16KiB "$B/trainshim" run --log "$T/demo.tslog" -- "$B/workloads/mlp_train" 10 1024 \
  > "$T/demo.out" 2>&1 || { echo "FAIL: mlp_train"; cat "$T/demo.out"; fail=1; }
"$B/trainshim" report --format json "$T/demo.tslog" > "$T/demo.json" || { echo "FAIL: report demo"; fail=1; }
"$B/trainshim" report "$T/demo.tslog" > "$T/demo.txt" || fail=1
python3 - "$T" <<'PY' || fail=1
import json, math, sys
d = sys.argv[1]
bad = []

def advice(name):
    with open(f"{d}/{name}.json") as f:
        j = json.load(f)
    with open(f"{d}/{name}.txt") as f:
        txt = f.read()
    out = {}
    for a in j.get("advice", []):
        if "- " + a["text"] not in txt:
            bad.append(f"{name}: JSON line {a['rule']} not in the text ADVICE section")
        out[a["rule"]] = a
    return out

def near(name, got, want, tol=1e-6):
    if got is None or not math.isclose(got, want, rel_tol=tol):
        bad.append(f"{name}: {got} != {want}")

def fires(log, rule):
    a = advice(log)
    if rule not in a:
        bad.append(f"{log}: rule {rule} did not fire (got {sorted(a)})")
        return {}, "", []
    return a[rule]["figures"], a[rule]["text"], a[rule].get("sites", [])

def silent(log, rule):
    a = advice(log)
    if rule in a:
        bad.append(f"{log}: rule {rule} fired: {a[rule]['text']}")

# host_sync: one pending cudaStreamSynchronize per step (9.3 ms), one that
# found the stream done (not counted); GPU idle 0.5 ms after each
f, t, sites = fires("syncs", "host_sync")
near("syncs per step", f.get("syncs_per_step"), 1.0)
near("steps", f.get("steps"), 9)
near("host wait", f.get("host_wait_ns_per_step"), 9.3e6)
near("sync calls", f.get("sync_calls_per_step"), 1.0)
near("copy waits", f.get("copy_waits_per_step") + 1, 1.0)
near("gpu idle", f.get("gpu_idle_ns_per_step"), 0.5e6)
if [(s["api"], s["per_step"], s["frames"]) for s in sites] != [
        ("cudaStreamSynchronize", 1.0, ["0x401234", "0x402345", "0x403456"])]:
    bad.append(f"syncs: sites {sites}")
for s in ("1.0 host synchronizations per step", "9.300 ms of host time", "idle 0.500 ms per step",
          "cudaStreamSynchronize (1.0/step) at 0x401234 < 0x402345 < 0x403456"):
    if s not in t:
        bad.append(f"syncs: text lacks {s!r}: {t}")
silent("idle", "host_sync")
silent("syncs", "input_stall")
silent("stall", "host_sync")

# input_stall: 7 ms of 10 kernel-free at each step start, 1 ms of it in the copy
f, t, _ = fires("stall", "input_stall")
near("idle share", f.get("idle_share"), 0.7)
near("idle per step", f.get("idle_ns_per_step"), 7e6)
near("stalled steps", f.get("stalled_steps"), 9)
near("copy share", f.get("host_copy_share"), 1 / 7)
near("wait share", f.get("host_wait_share") + 1, 1.0)
near("other share", f.get("host_other_share"), 6 / 7)
for s in ("70.0% of the step time", "7.000 ms per step", "num_workers", "prefetch_factor", "pin_memory=True"):
    if s not in t:
        bad.append(f"stall: text lacks {s!r}: {t}")
silent("fed", "input_stall")
silent("demo", "input_stall")

for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "PASS: host_sync and input_stall fire on their logs with the hand-worked figures, stay silent on their twins and input_stall on the demo"
exit $fail
