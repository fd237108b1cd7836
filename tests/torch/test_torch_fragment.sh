#!/usr/bin/env bash
# The fragmentation advice on a real torch run (tests/torch/case_fragment.py
# on a 512 MiB emulated device): under torch's native caching allocator
# (TRAINSHIM_TORCH_BACKEND=off) the failed cudaMalloc, the cached
# segments torch releases and its retry show in the log, and the report's
# fragmentation line carries torch's own figures (its retries, the bytes of
# segments it freed, its reserved bytes before the retry).  The same run
# under the default (trainshim adds backend:cudaMallocAsync and serves every
# tensor: no allocation fails there, which is what the advice promises) and
# a native run that fits get no such line.  The program prints
# the same values with and without the shim.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} EMU_DEVICE_MEMORY=512M
bad=0
torch_py -- tests/torch/case_fragment.py fragment > "$tmp/plain.out"
run() { # name mode env...
  local name=$1 mode=$2; shift 2
  torch_shim "$@" TRAINSHIM_LOG="$tmp/$name.log" -- tests/torch/case_fragment.py "$mode" > "$tmp/$name.out" 2> "$tmp/$name.err" \
    || { echo "$name: failed"; tail -5 "$tmp/$name.err"; bad=1; return; }
  no_shim_error "$tmp/$name.err" || bad=1
  "$TRAINSHIM" report --format json "$tmp/$name.log" > "$tmp/$name.json"
  "$TRAINSHIM" report "$tmp/$name.log" > "$tmp/$name.txt"
}
run native fragment TRAINSHIM_TORCH_BACKEND=off
run async fragment
run fits fits TRAINSHIM_TORCH_BACKEND=off
want_torch_alloc "left alone (TRAINSHIM_TORCH_BACKEND=off)" "$tmp/native.log" || bad=1
want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp/async.log" || bad=1
same_output "native" "$tmp/plain.out" "$tmp/native.out" || bad=1
grep -v '^\(backend\|torch\) ' "$tmp/plain.out" > "$tmp/plain.values"
grep -v '^\(backend\|torch\) ' "$tmp/async.out" > "$tmp/async.values"
same_output "cudaMallocAsync" "$tmp/plain.values" "$tmp/async.values" || bad=1
grep -qx 'backend cudaMallocAsync' "$tmp/async.out" || { echo "async: torch not on cudaMallocAsync"; bad=1; }
"$TORCH_PY" - "$tmp" <<'PY' || bad=1
import json, sys
d = sys.argv[1]
MiB = 1 << 20

def advice(name):
    a = {x["rule"]: x for x in json.load(open(f"{d}/{name}.json")).get("advice", [])}
    txt = open(f"{d}/{name}.txt").read()
    for x in a.values():
        assert "- " + x["text"] in txt, f"{name}: {x['rule']} not in the text ADVICE"
    return a

retries, freed, peak = (int(v) for v in next(l for l in open(f"{d}/native.out") if l.startswith("torch ")).split()[1:])
assert retries >= 1, f"torch did not retry ({retries}): the case no longer fragments"
a = advice("native")
assert "fragmentation" in a, f"native: no fragmentation advice: {sorted(a)}"
f, t = a["fragmentation"]["figures"], a["fragmentation"]["text"]
assert f["flushes"] == retries and f["retries_served"] == retries, (f, retries)
assert f["released_bytes"] == freed, ("released", f["released_bytes"], "torch freed", freed)
assert f["reserved_at_first_bytes"] == peak, ("reserved", f["reserved_at_first_bytes"], "torch peak", peak)
assert f["requested_at_first_bytes"] == 100 * MiB, f
assert "retried 100.00 MiB" in t and "expandable_segments:True" in t, t
print(f"native: {t}")
for name in ("async", "fits"):
    assert "fragmentation" not in advice(name), f"{name}: fragmentation advice: {advice(name)['fragmentation']['text']}"
# what the advice promises: trainshim serving every tensor, the same program
# needs no failed allocation and no flush
m = {n: json.load(open(f"{d}/{n}.json"))["memory"] for n in ("native", "async")}
assert m["native"]["alloc_failed"] >= 1, m["native"]
assert m["async"]["alloc_failed"] == 0 and m["async"]["free_calls"] >= 8, m["async"]
print("async, fits: no fragmentation advice; under cudaMallocAsync no allocation failed")
PY
[ $bad = 0 ] && echo "PASS: fragmentation advice with torch's own retry and freed-segment figures; silent under cudaMallocAsync and when memory fits"
exit $bad
