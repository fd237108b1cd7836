#!/usr/bin/env bash
# The device allocator's own figures reach `trainshim report`: the demo
# training job (build/workloads/mlp_train) under the shim writes a
# TS_REC_POOL_STATS record at shutdown (before the end record), and the JSON
# report's memory section carries the pool's peak reserved, fragmentation,
# driver calls (memory, and the fence checks apart), cache hits, OOMs and
# mode.  With TRAINSHIM_ALLOC=off no pool
# exists: the new fields are absent (or the mode says "off").  Then
# test_devmem_report.c (a device reset, then an allocation larger than the
# device): the log holds one POOL_STATS record for the reset pool and one at
# shutdown, a POOL_OOM record for the refused request, all before the END
# record, and the report counts the OOM.
set -u
B=${B:-build}
bin=$PWD/$B/workloads/mlp_train
shim=$PWD/$B/libtrainshim.so
tool=$PWD/$B/trainshim
for f in "$bin" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
for mode in expandable caching off; do
  log=$tmp/$mode.log
  TRAINSHIM_ALLOC=$mode TRAINSHIM_LOG="$log" LD_PRELOAD="$shim" "$bin" 10 256 > "$tmp/$mode.out" 2> "$tmp/$mode.err" \
    || { echo "FAIL: $mode run:"; cat "$tmp/$mode.err"; fail=1; continue; }
  [ -s "$log" ] || { echo "FAIL: $mode: no log written"; fail=1; continue; }
  "$tool" report --format json "$log" > "$tmp/$mode.json" 2> "$tmp/$mode.rep.err" \
    || { echo "FAIL: $mode: report failed:"; cat "$tmp/$mode.rep.err"; fail=1; continue; }
  "$tool" report "$log" > "$tmp/$mode.txt" 2>&1 || { echo "FAIL: $mode: text report failed"; fail=1; }
  python3 - "$mode" "$tmp/$mode.json" "$tmp/$mode.txt" <<'EOF' || fail=1
import json, sys
mode, path, txt = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
m = json.load(open(path))["memory"]
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
if mode == "off":
    want(m.get("allocator_mode", "off") == "off", "allocator_mode %r with TRAINSHIM_ALLOC=off" % m.get("allocator_mode"))
    for k in ("fragmentation", "driver_calls", "cache_hits", "ooms"):
        want(k not in m or m.get("allocator_mode") == "off", "%s present with TRAINSHIM_ALLOC=off" % k)
    want("allocator " not in txt, "text report names an allocator with TRAINSHIM_ALLOC=off")
else:
    for k in ("allocator_mode", "fragmentation", "driver_calls", "fence_calls", "cache_hits", "ooms",
              "peak_reserved_bytes", "peak_allocated_bytes"):
        want(k in m, "memory.%s missing" % k)
    if not bad:
        r, a = m["peak_reserved_bytes"], m["peak_allocated_bytes"]
        want(m["allocator_mode"] == mode, "allocator_mode %r, want %r" % (m["allocator_mode"], mode))
        want(a > 0, "peak_allocated_bytes %d" % a)
        want(r >= a, "peak_reserved_bytes %d < peak_allocated_bytes %d" % (r, a))
        if mode == "expandable":
            want(r % (2 << 20) == 0, "peak_reserved_bytes %d not a multiple of 2 MiB" % r)
        f = m["fragmentation"]
        want(isinstance(f, float) and 0.0 <= f < 1.0, "fragmentation %r not in [0,1)" % f)
        want(m["driver_calls"] > 0, "driver_calls %r" % m["driver_calls"])
        # its synchronous cudaFree calls are reused only after a fence
        want(m["fence_calls"] > 0, "fence_calls %r" % m["fence_calls"])
        want(m["cache_hits"] > 0, "cache_hits %r" % m["cache_hits"])
        want(m["ooms"] == 0, "ooms %r on a job that fits" % m["ooms"])
        # its allocations are under 2 MiB: no plan (only the expandable mode plans)
        plan = [l for l in txt.splitlines() if l.startswith("step plan")]
        want(plan == (["step plan           none formed (no sequence of allocations over 2 MiB repeated)"]
                      if mode == "expandable" else []), "step plan lines %r" % plan)
        want("allocator           %s" % mode in txt, "text report lacks the allocator line")
        want("fragmentation" in txt and "driver calls" in txt and "fence checks" in txt and "cache hits" in txt,
             "text report lacks the pool lines")
if bad:
    print("FAIL: %s: %s" % (mode, "; ".join(bad)))
    print(json.dumps(m, indent=1)[:2000])
    sys.exit(1)
print("%s ok: %s" % (mode, {k: m.get(k) for k in ("allocator_mode", "peak_reserved_bytes",
      "peak_allocated_bytes", "fragmentation", "driver_calls", "fence_calls", "cache_hits", "ooms")}))
EOF
done

prog=$PWD/$B/tests/integration/test_devmem_report
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
log=$tmp/reset.log
EMU_DEVICE_MEMORY=256MiB TRAINSHIM_LOG="$log" LD_PRELOAD="$shim" "$prog" > "$tmp/reset.out" 2> "$tmp/reset.err" \
  || { echo "FAIL: reset/OOM program under the shim:"; cat "$tmp/reset.out" "$tmp/reset.err"; exit 1; }
"$tool" report --format json "$log" > "$tmp/reset.json" || { echo "FAIL: report of the reset run"; exit 1; }
python3 - "$log" "$tmp/reset.json" <<'EOF' || fail=1
import json, struct, sys
sys.path.insert(0, "tests")
from tslog import records
recs = records(sys.argv[1])
types = [t for t, _ in recs]
bad = []
if not types or types[-1] != 8:
    bad.append("the log does not end with its END record")
stats = [struct.unpack_from("<iiII13Q", r, 24) for t, r in recs if t == 32]
reasons = sorted(s[2] for s in stats if s[0] == 0)
if reasons != [1, 2]:
    bad.append("device 0 POOL_STATS reasons %r, want [1 (reset), 2 (shutdown)]" % reasons)
for s in stats:
    if s[4] < s[5] or s[5] < 32 << 20:
        bad.append("POOL_STATS peak reserved %d / peak allocated %d (>= 2 x 16 MiB were live)" % (s[4], s[5]))
ooms = [struct.unpack_from("<ii4Q", r, 24) for t, r in recs if t == 33]
if len(ooms) != 1 or ooms[0][2] != 1 << 40:
    bad.append("POOL_OOM records %r, want one for 1 TiB" % (ooms,))
m = json.load(open(sys.argv[2]))
mem = m["memory"]
if m["run"]["status"] != "complete" or m["run"]["unknown_records"] != 0:
    bad.append("run status %r, unknown records %r" % (m["run"]["status"], m["run"]["unknown_records"]))
if mem.get("ooms") != 1:
    bad.append("memory.ooms %r, want 1" % mem.get("ooms"))
if mem.get("peak_reserved_bytes", 0) < 64 << 20:
    bad.append("memory.peak_reserved_bytes %r below the 64 MiB live before the reset" % mem.get("peak_reserved_bytes"))
if bad:
    print("FAIL: reset/OOM log: " + "; ".join(bad))
    sys.exit(1)
print("reset/OOM ok: %d POOL_STATS, %d POOL_OOM, END last" % (len(stats), len(ooms)))
EOF
exit $fail
