#!/usr/bin/env bash
# Several NCCL ranks in one process (test_nccl_multirank.c): "g2", one
# thread driving two devices through ncclCommInitAll with grouped
# all-reduces (all_reduce_perf -g 2), and "t2", a thread per rank with each
# all-reduce in a group of one (-t 2, how torch issues them).  Each runs
# under the shim and without it (same output); the report's JSON must hold
# one communicator row per rank with that rank's exact calls and bytes,
# every grouped all-reduce timed (busbw known), a time in collectives of at
# most 100% of the run although the two ranks' times add up to more, and
# the ncclMemAlloc memory as NCCL-owned device memory inside the peak.
set -u
B=${B:-build}
prog=$B/tests/integration/test_nccl_multirank
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} EMU_DEVICES=2
fail=0
for mode in g2 t2; do
  "$prog" $mode > "$tmp/$mode.plain" 2>&1 || { echo "FAIL: $mode failed without the shim"; cat "$tmp/$mode.plain"; fail=1; continue; }
  TRAINSHIM_LOG="$tmp/$mode.log" TRAINSHIM_FLOP_SAMPLE=1 LD_PRELOAD="$shim" "$prog" $mode > "$tmp/$mode.out" 2> "$tmp/$mode.err" \
    || { echo "FAIL: $mode failed under the shim"; cat "$tmp/$mode.out" "$tmp/$mode.err"; fail=1; continue; }
  cmp -s "$tmp/$mode.plain" "$tmp/$mode.out" || { echo "FAIL: $mode output differs under the shim"; fail=1; }
  "$tool" report --format json "$tmp/$mode.log" > "$tmp/$mode.json" || { echo "FAIL: $mode report failed"; fail=1; continue; }
  python3 - "$mode" "$tmp/$mode.json" "$tmp/$mode.out" <<'PY' || fail=1
import json, sys
mode = sys.argv[1]
w = open(sys.argv[3]).read().split()
k = dict(zip(w[0::2], map(int, w[1::2])))
S, N, M = k["steps"], k["count"], k["memalloc"]
rep = json.load(open(sys.argv[2]))
n = rep["nccl"]
bad = []
ops = {o["op"]: o for o in n["ops"]}
ar = ops.get("AllReduce")
if set(ops) != {"AllReduce"} or not ar: bad.append(f"ops {sorted(ops)}")
else:
    if (ar["calls"], ar["bytes"]) != (2 * S, 2 * S * N * 4): bad.append(f"AllReduce calls/bytes {ar['calls']}/{ar['bytes']}")
    if ar["timed_calls"] != ar["calls"]: bad.append(f"grouped all-reduces timed {ar['timed_calls']} of {ar['calls']}")
    if ar["busbw_gbps"] is None or not ar["busbw_gbps"] > 0: bad.append(f"busbw {ar['busbw_gbps']}")
rows = sorted(n["communicators"], key=lambda c: c["rank"])
if [(c["size"], c["rank"], c["calls"], c["bytes"]) for c in rows] != [(2, r, S, S * N * 4) for r in (0, 1)]:
    bad.append(f"communicator rows {rows}")
if len({c["id"] for c in rows}) != 1: bad.append(f"the two ranks' rows name different communicators: {rows}")
run_ns = rep["run"]["duration_ns"]
share = n["collective_time_share"]
if share is None or not 0 < share <= 1.0: bad.append(f"time in collectives {share} of the run")
if n["estimated_collective_ns"] > run_ns: bad.append(f"collective time {n['estimated_collective_ns']} > run {run_ns}")
both = sum(c["estimated_collective_ns"] for c in rows)
# the shape this guards: each rank busy most of the run, so their sum is more than the run
if both <= n["estimated_collective_ns"]: bad.append(f"rank times {[c['estimated_collective_ns'] for c in rows]} vs {n['estimated_collective_ns']}")
lm = n["library_memory"]
if (lm["allocations"], lm["frees"], lm["peak_bytes"], lm["live_bytes"]) != (2, 2, 2 * M, 0): bad.append(f"library memory {lm}")
if rep["memory"]["peak_allocated_bytes"] < 2 * M: bad.append(f"peak allocated {rep['memory']['peak_allocated_bytes']} < NCCL-owned {2 * M}")
want_groups = S if mode == "g2" else 2 * S
if n["group_calls"] != want_groups: bad.append(f"group calls {n['group_calls']}, want {want_groups}")
for b in bad: print(f"FAIL {mode}:", b)
print(f"{mode}: rank times {[c['estimated_collective_ns'] for c in rows]} ns, summed {both / run_ns:.0%} of the run, reported {share:.0%}")
sys.exit(1 if bad else 0)
PY
  "$tool" report "$tmp/$mode.log" > "$tmp/$mode.txt" || fail=1
  grep -q "^NCCL-owned memory   2 ncclMemAlloc" "$tmp/$mode.txt" || { echo "FAIL: $mode: no NCCL-owned memory line"; fail=1; }
done
[ $fail = 0 ] && echo "ok: g2 and t2: per-rank rows, grouped all-reduces timed, time in collectives <= 100%, NCCL-owned memory"
exit $fail
