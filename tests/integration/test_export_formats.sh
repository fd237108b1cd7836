#!/usr/bin/env bash
# `trainshim export` in its three formats, each read back by a real parser:
#  - chrome-trace: python3's json; every "X" slice has name/ph/ts/dur/pid/tid
#    (numbers, dur > 0), counters ("C") carry numeric args and end at the
#    log's live bytes, one process per log (two ranks here), copies on the
#    stream threads they were issued on; GEMM slices from the MLP workload
#    when it is built;
#  - memory-snapshot: python3's pickle, checked against what PyTorch's
#    torch/cuda/_memory_viz.py reads (segments / device_traces, entries with
#    action/addr/size/stream/frames, frames with filename/line/name), every
#    alloc matched by at most one free_completed, the live blocks of
#    `segments` equal to the allocations never freed, and the frames naming
#    the program's functions;
#  - svg: parsed as XML, with one polyline per device series.
# The workload is test_stacks_symbols' child (known allocation sites, a
# synchronous and an asynchronous copy) under the shim with TRAINSHIM_STACKS.
set -u
B=${B:-build}
prog=$B/tests/integration/test_stacks_symbols
tool=$B/trainshim
case $B in /*) shim=$B/libtrainshim.so ;; *) shim=$PWD/$B/libtrainshim.so ;; esac
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
for r in 0 1; do
  RANK=$r TS_STACKS_CHILD=1 TRAINSHIM_STACKS=16 TRAINSHIM_LOG="$tmp/run.r$r.log" LD_PRELOAD="$shim" "$prog" \
    || { echo "FAIL: workload rank $r under the shim failed"; exit 1; }
done
logs="$tmp/run.r0.log $tmp/run.r1.log"
# the MLP workload adds GEMM records when it is built
mlp=$B/workloads/mlp_train
if [ -x "$mlp" ]; then
  RANK=2 TRAINSHIM_LOG="$tmp/mlp.log" LD_PRELOAD="$shim" "$mlp" 3 64 > /dev/null || { echo "FAIL: mlp_train under the shim"; exit 1; }
  logs="$logs $tmp/mlp.log"
fi

# ---------------------------------------------------------------- chrome trace
"$tool" export --type chrome-trace $logs -o "$tmp/trace.json" || { echo "FAIL: chrome-trace export"; exit 1; }
python3 - "$tmp/trace.json" "$([ -x "$mlp" ] && echo 1 || echo 0)" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
assert isinstance(ev, list) and ev, "no events"
num = (int, float)
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
want_procs = 3 if sys.argv[2] == "1" else 2
assert len(procs) == want_procs, procs
assert [procs[p].split()[:2] for p in sorted(procs)][:2] == [["rank", "0"], ["rank", "1"]], procs
slices = [e for e in ev if e["ph"] == "X"]
for e in slices:
    for k in ("name", "ts", "dur", "pid", "tid"):
        assert k in e, (k, e)
    assert isinstance(e["ts"], num) and isinstance(e["dur"], num) and e["dur"] > 0 and e["ts"] >= 0, e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["pid"] in procs, e
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
for p in (0, 1):
    copies = [e for e in slices if e["pid"] == p and e.get("cat") == "copy"]
    dirs = sorted(e["name"] for e in copies)
    assert dirs == ["D2D", "H2D"], (p, dirs)
    assert all(e["args"]["bytes"] == 1 << 20 for e in copies), copies
    # the asynchronous copy is on its own stream, the synchronous one on the legacy stream
    d2d = next(e for e in copies if e["name"] == "D2D")
    h2d = next(e for e in copies if e["name"] == "H2D")
    assert d2d["tid"] != h2d["tid"], copies
    assert threads[(p, h2d["tid"])].startswith("stream 0 "), threads
    assert threads[(p, d2d["tid"])].startswith("stream 0x"), threads
    counters = [e for e in ev if e["ph"] == "C" and e["pid"] == p]
    assert len(counters) == 107 + 100, len(counters)  # one sample per alloc and per free
    for c in counters:
        assert isinstance(c["ts"], num) and all(isinstance(v, num) for v in c["args"].values()), c
    ts = [c["ts"] for c in counters]
    assert ts == sorted(ts), "counter samples out of time order"
    assert counters[-1]["args"]["bytes"] == 4 * (1 << 20) + 8 * (1 << 20) + (1 << 18), counters[-1]
    assert max(c["args"]["bytes"] for c in counters) == counters[-1]["args"]["bytes"]
if sys.argv[2] == "1":
    gemm = [e for e in ev if e.get("cat") == "gemm" and e["pid"] == 2]
    assert gemm, "no GEMM events from mlp_train"
    assert all(e["args"]["flops"] == 2 * e["args"]["m"] * e["args"]["n"] * e["args"]["k"] * e["args"]["batch"] for e in gemm)
print("chrome trace ok: %d events, %d slices" % (len(ev), len(slices)))
PY

# ---------------------------------------------------------------- memory snapshot
"$tool" export --type memory-snapshot "$tmp/run.r0.log" -o "$tmp/snap.pickle" || { echo "FAIL: memory-snapshot export"; exit 1; }
python3 - "$tmp/snap.pickle" <<'PY' || fail=1
import pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))
assert isinstance(snap, dict) and "segments" in snap and "device_traces" in snap, snap.keys()
traces = snap["device_traces"]
assert isinstance(traces, list) and len(traces) >= 1 and all(isinstance(t, list) for t in traces)
actions = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free"}
live = {}
allocs = 0
def check_frames(fr, where):
    assert isinstance(fr, list), where
    for f in fr:
        assert set(f) >= {"filename", "line", "name"}, (where, f)
        assert isinstance(f["filename"], str) and isinstance(f["line"], int) and isinstance(f["name"], str), f
for e in traces[0]:
    for k in ("action", "addr", "size", "stream", "frames"):
        assert k in e, (k, e)
    assert e["action"] in actions, e
    assert isinstance(e["addr"], int) and isinstance(e["size"], int) and isinstance(e["stream"], int), e
    check_frames(e["frames"], e["action"])
    if e["action"] == "alloc":
        assert e["addr"] not in live, "alloc of a live address"
        live[e["addr"]] = e
        allocs += 1
    elif e["action"] == "free_completed":
        assert e["addr"] in live and live[e["addr"]]["size"] == e["size"], e
        del live[e["addr"]]
assert allocs == 107, allocs
names = {}
for a in live.values():
    top = a["frames"][0]["name"] if a["frames"] else None
    names[top] = names.get(top, 0) + a["size"]
assert names == {"alloc_weights": 4 << 20, "alloc_activations": 8 << 20, "alloc_workspace": 1 << 18}, names
seg_addrs = {}
for s in snap["segments"]:
    for k in ("device", "address", "total_size", "stream", "segment_type", "blocks"):
        assert k in s, (k, s)
    for b in s["blocks"]:
        for k in ("address", "size", "state", "frames"):
            assert k in b, (k, b)
        check_frames(b["frames"], "block")
        if b["state"] == "active_allocated":
            seg_addrs[b["address"]] = b["size"]
assert seg_addrs == {a: e["size"] for a, e in live.items()}, (seg_addrs, live.keys())
print("memory snapshot ok: %d trace entries, %d live blocks" % (len(traces[0]), len(seg_addrs)))
PY

# ---------------------------------------------------------------- svg
"$tool" export --type svg $logs -o "$tmp/mem.svg" || { echo "FAIL: svg export"; exit 1; }
python3 - "$tmp/mem.svg" <<'PY' || fail=1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
lines = root.findall(ns + "polyline")
assert len(lines) >= 2, len(lines)
for l in lines:
    pts = [tuple(map(float, p.split(","))) for p in l.get("points").split()]
    assert len(pts) >= 3 and all(0 <= x <= float(root.get("width")) and 0 <= y <= float(root.get("height")) for x, y in pts), pts[:5]
    assert [x for x, _ in pts] == sorted(x for x, _ in pts), "time goes backwards"
print("svg ok: %d series" % len(lines))
PY
# errors are reported, not crashed on
"$tool" export --type nope "$tmp/run.r0.log" -o "$tmp/x" 2>/dev/null && { echo "FAIL: unknown type accepted"; fail=1; }
"$tool" export --type svg /nonexistent.log -o "$tmp/x" 2>/dev/null && { echo "FAIL: missing log accepted"; fail=1; }
[ ! -e "$tmp/x" ] || { echo "FAIL: output written on error"; fail=1; }
[ $fail = 0 ] && echo "ok: chrome trace, memory snapshot and svg read back"
exit $fail
