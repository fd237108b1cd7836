#!/usr/bin/env bash
# GPU TIMELINE from CUPTI: test_cupti_timeline (known kernels, copies and two
# 60 ms idle gaps, then a fork) runs under the shim with TRAINSHIM_CUPTI=1 on
# the emulator.  The report's JSON must hold the kernels by name and count,
# the copy bytes per kind with pageable/pinned as the driver saw them, busy
# time between the kernels' total and kernels + copies, exactly the two
# gaps over the 25 ms threshold in the right places (checked against the
# chrome trace's GPU slices), and an idle advice line.  Without
# TRAINSHIM_CUPTI the section says how to enable it; with libcupti missing
# (a bad TRAINSHIM_CUPTI_LIB, and a library directory without the emulated
# libcupti) the program runs unchanged with one clear message.
set -u
B=${B:-build}
prog=$B/tests/integration/test_cupti_timeline
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
"$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run failed"; cat "$tmp/plain.err"; exit 1; }

# ---- with CUPTI
TRAINSHIM_CUPTI=1 TRAINSHIM_IDLE_GAP_US=25000 TRAINSHIM_LOG="$tmp/on.log" LD_PRELOAD="$shim" "$prog" \
  > "$tmp/on.out" 2> "$tmp/on.err" || { echo "FAIL: run with TRAINSHIM_CUPTI=1 failed"; cat "$tmp/on.err"; exit 1; }
cmp -s "$tmp/plain" "$tmp/on.out" || { echo "FAIL: output differs under the shim"; diff "$tmp/plain" "$tmp/on.out"; fail=1; }
if grep -q "trainshim: " "$tmp/on.err"; then echo "FAIL: messages with CUPTI present:"; cat "$tmp/on.err"; fail=1; fi
[ "$(ls "$tmp" | grep -c '^on.*\.log$')" = 1 ] || { echo "FAIL: the fork child wrote a log of its own"; ls "$tmp"; fail=1; }
"$tool" report --format json "$tmp/on.log" > "$tmp/on.json" 2> "$tmp/rerr" || { echo "FAIL: report failed"; cat "$tmp/rerr"; exit 1; }
"$tool" report "$tmp/on.log" > "$tmp/on.txt" 2>&1 || { echo "FAIL: text report failed"; exit 1; }
"$tool" export --type chrome-trace "$tmp/on.log" -o "$tmp/trace.json" 2> "$tmp/eerr" || { echo "FAIL: export failed"; cat "$tmp/eerr"; exit 1; }
python3 - "$tmp/on.json" "$tmp/on.out" "$tmp/trace.json" "$tmp/on.txt" <<'PY' || fail=1
import json, sys
rep = json.load(open(sys.argv[1]))
facts = dict(kv.split("=") for kv in open(sys.argv[2]).read().split("facts", 1)[1].split())
facts = {k: int(v) for k, v in facts.items()}
trace = json.load(open(sys.argv[3]))["traceEvents"]
text = open(sys.argv[4]).read()
bad = []
def chk(name, got, exp):
    if got != exp: bad.append(f"{name} = {got!r}, want {exp!r}")
if rep["run"]["status"] != "complete": bad.append(f"log status {rep['run']['status']}")
if rep["run"]["unknown_records"] != 0: bad.append(f"unknown_records {rep['run']['unknown_records']}")
g = rep["gpu"]
chk("source", g["source"], "cupti")
chk("status", g["status"], "complete")
chk("kernel_count", g["kernel_count"], facts["kernels"])
chk("copy_count", g["copy_count"], 4)
chk("dropped_records", g["dropped_records"], 0)
chk("threshold_ns", g["threshold_ns"], 25_000_000)
k = {r["name"]: r for r in g["kernels"]}
chk("kernel names", sorted(k), ["_Z5kBetav", "_Z6kAlphav"])
if "_Z6kAlphav" in k and "_Z5kBetav" in k:
    chk("alpha calls", k["_Z6kAlphav"]["calls"], facts["alpha"])
    chk("beta calls", k["_Z5kBetav"]["calls"], facts["beta"])
    # each kernel sleeps its time on the emulator: a lower bound, never an upper one
    if k["_Z6kAlphav"]["gpu_ns"] < facts["alpha"] * facts["alpha_ms"] * 1_000_000: bad.append("alpha GPU time below its sleeps")
    if k["_Z5kBetav"]["gpu_ns"] < facts["beta"] * facts["beta_ms"] * 1_000_000: bad.append("beta GPU time below its sleeps")
    chk("kernels ordered by time", g["kernels"][0]["name"], "_Z6kAlphav")
    chk("kernel_ns", g["kernel_ns"], sum(r["gpu_ns"] for r in g["kernels"]))
c = {(r["kind"], r["host"]): r for r in g["copies"]}
chk("copy rows", sorted(c), [("DtoD", "device"), ("DtoH", "pageable"), ("HtoD", "pageable"), ("HtoD", "pinned")])
chk("HtoD pageable bytes", c.get(("HtoD", "pageable"), {}).get("bytes"), facts["h2d_pageable"])
chk("HtoD pinned bytes", c.get(("HtoD", "pinned"), {}).get("bytes"), facts["h2d_pinned"])
chk("DtoH pageable bytes", c.get(("DtoH", "pageable"), {}).get("bytes"), facts["d2h_pageable"])
chk("DtoD bytes", c.get(("DtoD", "device"), {}).get("bytes"), facts["d2d"])
chk("HtoD total", sum(r["bytes"] for r in g["copies"] if r["kind"] == "HtoD"), facts["h2d"])
# one stream's kernels never overlap: the union holds all of them, and at most kernels + copies
if not (g["kernel_ns"] <= g["busy_ns"] <= g["kernel_ns"] + g["copy_ns"]):
    bad.append(f"busy_ns {g['busy_ns']} outside [{g['kernel_ns']}, {g['kernel_ns'] + g['copy_ns']}]")
if not (0 < g["busy_share"] < 1): bad.append(f"busy_share {g['busy_share']}")
chk("idle_gap_count", g["idle_gap_count"], facts["gaps"])
gaps = g["idle_gaps"]
chk("idle_gaps listed", len(gaps), facts["gaps"])
for x in gaps:
    if x["duration_ns"] < facts["gap_ms"] * 1_000_000: bad.append(f"gap {x} shorter than the {facts['gap_ms']} ms sleep")
if len(gaps) == 2:
    if not gaps[0]["start_ns"] < gaps[1]["start_ns"]: bad.append("gaps not in time order")
    chk("idle_gap_total_ns", g["idle_gap_total_ns"], gaps[0]["duration_ns"] + gaps[1]["duration_ns"])
    chk("longest_idle_gap_ns", g["longest_idle_gap_ns"], max(x["duration_ns"] for x in gaps))
chk("devices", [d["device"] for d in g["devices"]], [0])
if not any(a["topic"] == "idle" and "GPU idle" in a["text"] and "2 gaps" in a["text"] for a in g["advice"]):
    bad.append(f"no idle advice: {g['advice']}")
# the gaps sit where the program slept: after the two alpha kernels, and after beta + DtoD
sl = sorted((e for e in trace if e.get("cat", "").startswith("gpu")), key=lambda e: e["ts"])
names = [e["name"] for e in sl]
chk("GPU slices in order", names, ["HtoD", "HtoD", "_Z6kAlphav", "_Z6kAlphav", "_Z5kBetav", "DtoD",
                                    "_Z6kAlphav", "_Z5kBetav", "DtoH"])
holes = [i for i in range(1, len(sl)) if sl[i]["ts"] - (sl[i - 1]["ts"] + sl[i - 1]["dur"]) >= 25_000]
chk("gaps in the trace after slices", holes, [4, 6])
if not any(e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"]["name"].startswith("GPU 0 stream") for e in trace): bad.append("no GPU track names")
for want in ("== GPU TIMELINE ==", "_Z6kAlphav", "HtoD pageable", "advice          GPU idle"):
    if want not in text: bad.append(f"text report lacks {want!r}")
if bad:
    print("FAIL: " + "\n  ".join(bad)); sys.exit(1)
PY

# ---- without CUPTI: the section says how to turn it on
TRAINSHIM_LOG="$tmp/off.log" LD_PRELOAD="$shim" "$prog" > "$tmp/off.out" 2> "$tmp/off.err" || { echo "FAIL: run without CUPTI failed"; exit 1; }
"$tool" report "$tmp/off.log" > "$tmp/off.txt" 2>&1 || { echo "FAIL: report failed"; exit 1; }
"$tool" report --format json "$tmp/off.log" > "$tmp/off.json" 2>&1 || { echo "FAIL: report failed"; exit 1; }
[ "$(grep -c 'TRAINSHIM_CUPTI=1' "$tmp/off.txt")" = 1 ] || { echo "FAIL: the text report does not say once how to enable CUPTI"; sed -n '/GPU TIMELINE/,$p' "$tmp/off.txt"; fail=1; }
python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["gpu"]; sys.exit(0 if g["status"]=="off" and g["source"] is None and "TRAINSHIM_CUPTI=1" in g["hint"] and "busy_ns" not in g else 1)' "$tmp/off.json" \
  || { echo "FAIL: JSON gpu without CUPTI"; fail=1; }

# ---- killed by SIGTERM after the first phase: the signal flush gets its GPU records
TRAINSHIM_CUPTI=1 TRAINSHIM_LOG="$tmp/term.log" LD_PRELOAD="$shim" "$prog" term > /dev/null 2> "$tmp/term.err"
rc=$?
[ $rc = 143 ] || { echo "FAIL: SIGTERM run exited $rc, not by the signal"; cat "$tmp/term.err"; fail=1; }
"$tool" report --format json "$tmp/term.log" > "$tmp/term.json" 2> /dev/null || { echo "FAIL: report of the killed run failed"; fail=1; }
python3 - "$tmp/term.json" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))["gpu"]
k = {r["name"]: r["calls"] for r in g.get("kernels", [])}
c = sorted((r["kind"], r["host"], r["bytes"]) for r in g.get("copies", []))
if k != {"_Z6kAlphav": 2} or c != [("HtoD", "pageable", 65536), ("HtoD", "pinned", 1 << 20)]:
    print(f"FAIL: after SIGTERM the log holds kernels {k} and copies {c}, want the first phase's"); sys.exit(1)
PY

# ---- libcupti absent: the run goes on, one clear message
check_absent() { # name, then the environment of the run
  local name=$1; shift
  env "$@" TRAINSHIM_CUPTI=1 TRAINSHIM_LOG="$tmp/$name.log" LD_PRELOAD="$shim" "$prog" > "$tmp/$name.out" 2> "$tmp/$name.err" \
    || { echo "FAIL: $name: the run failed without libcupti"; cat "$tmp/$name.err"; fail=1; return; }
  cmp -s "$tmp/plain" "$tmp/$name.out" || { echo "FAIL: $name: output differs"; fail=1; }
  [ "$(grep -c '^trainshim: ' "$tmp/$name.err")" = 1 ] && grep -q '^trainshim: warning: TRAINSHIM_CUPTI=1: .*continuing without the GPU timeline' "$tmp/$name.err" \
    || { echo "FAIL: $name: not exactly one clear message:"; cat "$tmp/$name.err"; fail=1; }
  "$tool" report "$tmp/$name.log" > "$tmp/$name.txt" 2>&1 && grep -q "CUPTI was requested but not available" "$tmp/$name.txt" \
    || { echo "FAIL: $name: the report does not say CUPTI was unavailable"; sed -n '/GPU TIMELINE/,$p' "$tmp/$name.txt"; fail=1; }
}
check_absent badpath TRAINSHIM_CUPTI_LIB=/nonexistent/libcupti.so.13
mkdir "$tmp/lib"
for f in "$PWD/$B"/emu/*; do case ${f##*/} in *cupti*) ;; *) ln -s "$f" "$tmp/lib/";; esac; done
# without the emulated one, dlopen may find a real libcupti on the system
# path, which refuses to work on the emulated driver: one message either way
check_absent nolib LD_LIBRARY_PATH="$tmp/lib"

[ $fail = 0 ] && echo "test_cupti_timeline: ok"
exit $fail
