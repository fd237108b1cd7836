#!/usr/bin/env bash
# NCCL accounting with two ranks: test_nccl_accounting starts two processes
# that talk through the emulated NCCL under the shim, one log per rank
# (TRAINSHIM_LOG=...r%r.log, rank from RANK).  The report over both logs must
# hold, per rank, the exact calls and bytes of every op, the nccl-tests "S"
# (algo bytes) and busbw = algbw x factor for the communicator size, group
# calls, communicator creation/split/finalize/destroy, the same run-wide
# communicator ids on both ranks, and the rank table: the sleeping rank 1 is
# the slowest of every steady step.
set -u
B=${B:-build}
prog=$B/tests/integration/test_nccl_accounting
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
TRAINSHIM_LOG="$tmp/r%r.log" TRAINSHIM_FLOP_SAMPLE=1 LD_PRELOAD="$shim" "$prog" > "$tmp/out" 2> "$tmp/err" \
  || { echo "FAIL: ranks failed under the shim"; cat "$tmp/out" "$tmp/err"; exit 1; }
for r in 0 1; do [ -s "$tmp/r$r.log" ] || { echo "FAIL: no log for rank $r"; ls "$tmp"; exit 1; }; done
"$tool" report --format json "$tmp/r0.log" "$tmp/r1.log" > "$tmp/all.json" || { echo "FAIL: report failed"; exit 1; }
"$tool" report "$tmp/r0.log" "$tmp/r1.log" > "$tmp/all.txt" || { echo "FAIL: text report failed"; exit 1; }
fail=0
python3 - "$tmp/all.json" "$tmp/out" <<'PY' || fail=1
import json, sys
w = open(sys.argv[2]).read().split()
k = dict(zip(w[0::2], map(int, w[1::2])))
S = k["steps"]
rep = json.load(open(sys.argv[1]))
bad = []
def close(a, b): return abs(a - b) <= 1e-5 + 2e-3 * abs(b)
want = {  # op: (calls, bytes, algo bytes with n = 2)
    "AllReduce": (S + 1, 4 * (S * k["ar"] + k["child"]), 4 * (S * k["ar"] + k["child"])),
    "AllGather": (S, 4 * S * k["ag"], 2 * 4 * S * k["ag"]),
    "ReduceScatter": (S, 4 * S * k["rs"], 2 * 4 * S * k["rs"]),
    "Broadcast": (S, 4 * S * k["bc"], 4 * S * k["bc"]),
    "Send": (S, 4 * S * k["p2p"], 4 * S * k["p2p"]),
    "Recv": (S, 4 * S * k["p2p"], 4 * S * k["p2p"]),
}
factor = {"AllReduce": 1.0, "AllGather": 0.5, "ReduceScatter": 0.5, "Broadcast": 1.0, "Send": 1.0, "Recv": 1.0}
ids = []
for i, r in enumerate(rep["ranks"]):
    if r["run"]["rank"] != i: bad.append(f"log {i} has rank {r['run']['rank']}")
    n = r["nccl"]
    ops = {o["op"]: o for o in n["ops"]}
    if set(ops) != set(want): bad.append(f"rank {i}: ops {sorted(ops)}")
    for op, (calls, by, algo) in want.items():
        o = ops.get(op)
        if not o: continue
        if (o["calls"], o["bytes"], o["algo_bytes"]) != (calls, by, algo):
            bad.append(f"rank {i} {op}: calls/bytes/algo {o['calls']}/{o['bytes']}/{o['algo_bytes']}, want {calls}/{by}/{algo}")
        if o["timed_calls"]:
            if not close(o["busbw_gbps"], o["algbw_gbps"] * factor[op]):
                bad.append(f"rank {i} {op}: busbw {o['busbw_gbps']} != algbw {o['algbw_gbps']} x {factor[op]}")
            if o["timed_calls"] == o["calls"] and not close(o["algbw_gbps"], o["algo_bytes"] / o["timed_gpu_ns"]):
                bad.append(f"rank {i} {op}: algbw {o['algbw_gbps']} != {o['algo_bytes']} B / {o['timed_gpu_ns']} ns")
    for op in ("Send", "Recv"):  # grouped: timed as a unit, the group's time shared by bytes
        o = ops.get(op, {})
        if not o.get("timed_calls") or o.get("busbw_gbps") is None: bad.append(f"rank {i}: grouped {op} not timed: {o}")
    if not any(ops[o]["timed_calls"] for o in ("AllReduce", "AllGather", "ReduceScatter", "Broadcast") if o in ops):
        bad.append(f"rank {i}: no collective timed with TRAINSHIM_FLOP_SAMPLE=1")
    for key, v in (("group_calls", S), ("comms_created", 1), ("comms_split", 1), ("comms_destroyed", 2), ("comms_finalized", 1)):
        if n[key] != v: bad.append(f"rank {i}: {key} = {n[key]}, want {v}")
    comms = sorted(n["communicators"], key=lambda c: -c["calls"])
    if [(c["size"], c["rank"], c["calls"]) for c in comms] != [(2, i, 6 * S), (2, i, 1)]:
        bad.append(f"rank {i}: communicators {comms}")
    ids.append([c["id"] for c in comms])
    if r["compute"]["gemm_flops"] != S * 2 * 32 ** 3: bad.append(f"rank {i}: gemm_flops {r['compute']['gemm_flops']}")
if len(ids) == 2 and ids[0] != ids[1]: bad.append(f"communicator ids differ between ranks: {ids}")
ra = rep["total"]["rank_accounting"]
if [x["rank"] for x in ra["ranks"]] != [0, 1] or any(x["estimated_collective_ns"] <= 0 for x in ra["ranks"]):
    bad.append(f"rank table {ra['ranks']}")
if len(ra["steps"]) < S - 2: bad.append(f"only {len(ra['steps'])} steps lined up")
for st in ra["steps"]:
    if st["index"] == 1: continue  # warm-up: first-use setup (connections) may block either rank
    if st["slowest_rank"] != 1 or st["fastest_rank"] != 0 or st["slowest_ns"] < k["slow_us"] * 1000:
        bad.append(f"step {st}: want rank 1 slowest (>= {k['slow_us']} us)")
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
grep -q "^== COMMUNICATION ==" "$tmp/all.txt" || { echo "FAIL: no COMMUNICATION section"; fail=1; }
grep -q "^== RANKS: COMPUTE AND COMMUNICATION ==" "$tmp/all.txt" || { echo "FAIL: no rank table"; fail=1; }
grep -q "^- collectives took an estimated" "$tmp/all.txt" || { echo "FAIL: no collective-share advice"; fail=1; }
[ $fail = 0 ] && echo "ok: two ranks: per-op calls, bytes, algbw/busbw, communicators, stragglers"
exit $fail
