#!/usr/bin/env bash
# input_stall on a real run: test_input_stall (8 steps, each a host-side
# "data load" of 30 ms before the batch's copy and three GEMMs, no sync in
# the loop) under the shim with CUPTI, emulator jitter on, prints the same
# as without the shim; its report says the GPU ran no kernel for most of
# each step at the step starts while the host was neither copying nor
# waiting (the load), with the DataLoader advice, and host_sync stays
# silent (nothing synchronizes in the loop).  The same loop without the load
# keeps the GPU busy at every step start: input_stall silent.
set -u
B=${B:-build}
prog=$B/tests/integration/test_input_stall
shim=$PWD/$B/libtrainshim.so
tool=$B/trainshim
for f in "$prog" "$shim" "$tool"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
"$prog" 30 > "$tmp/plain.out" || { echo "FAIL: run without the shim failed"; exit 1; }
TRAINSHIM_LOG="$tmp/run.log" TRAINSHIM_CUPTI=1 LD_PRELOAD="$shim" "$prog" 30 > "$tmp/out" 2> "$tmp/err" \
  || { echo "FAIL: run under the shim failed"; cat "$tmp/out" "$tmp/err"; exit 1; }
cmp -s "$tmp/plain.out" "$tmp/out" || { echo "FAIL: output differs with the shim"; diff "$tmp/plain.out" "$tmp/out"; exit 1; }
"$tool" report --format json "$tmp/run.log" > "$tmp/run.json" || { echo "FAIL: report failed"; exit 1; }
# the twin with the batch ready (no load): the host runs ahead of the GPU
TRAINSHIM_LOG="$tmp/fed.log" TRAINSHIM_CUPTI=1 LD_PRELOAD="$shim" "$prog" 0 > "$tmp/fed.out" 2> "$tmp/fed.err" \
  || { echo "FAIL: run under the shim failed (no load)"; cat "$tmp/fed.out" "$tmp/fed.err"; exit 1; }
"$tool" report --format json "$tmp/fed.log" > "$tmp/fed.json" || { echo "FAIL: report failed"; exit 1; }
python3 - "$tmp/run.json" "$tmp/fed.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
adv = {a["rule"]: a for a in rep.get("advice", [])}
bad = []
fed = [a for a in json.load(open(sys.argv[2])).get("advice", []) if a["rule"] == "input_stall"]
if fed:
    bad.append(f"input_stall fired with the batch ready: {fed[0]['text']}")
if rep["compute"]["steps"] != 8:
    bad.append(f"steps {rep['compute']['steps']}, want 8")
if "host_sync" in adv:
    bad.append(f"host_sync fired: {adv['host_sync']['text']}")
if "input_stall" not in adv:
    bad.append(f"input_stall did not fire: {sorted(adv)}")
else:
    f = adv["input_stall"]["figures"]
    # 30 ms of load per step against a few ms of copies and GEMMs
    if not f["idle_share"] > 0.5:
        bad.append(f"idle share {f['idle_share']}")
    if f["stalled_steps"] != 7:
        bad.append(f"stalled steps {f['stalled_steps']}, want the 7 after the first")
    if not f["host_other_share"] > f["host_copy_share"] + f["host_wait_share"]:
        bad.append(f"the load is not what the host did: {f}")
    t = adv["input_stall"]["text"]
    if "num_workers" not in t or "prefetch_factor" not in t:
        bad.append(f"text: {t}")
    print(f"input_stall: GPU kernel-free {100 * f['idle_share']:.1f}% of the step time at step starts,",
          f"{f['idle_ns_per_step'] / 1e6:.3f} ms per step; host in copies {100 * f['host_copy_share']:.1f}%,",
          f"waiting {100 * f['host_wait_share']:.1f}%, elsewhere {100 * f['host_other_share']:.1f}%")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
