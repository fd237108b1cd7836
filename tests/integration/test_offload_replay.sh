#!/usr/bin/env bash
# trainshim replay --device-memory SIZE [--offload] on a real PyTorch trace
# (opt-zo-finetune, ~1.67 GiB at peak) with a 1 GiB device, on the emulated
# driver and on the fake provider: without --offload the replay runs out of
# memory; with it there is no OOM, the same peaks as on an unlimited device,
# and the bytes that would have lived on the host are exactly the peak
# reserved beyond the device's 1 GiB.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
TRACES=${TRACES:-/work/shared/traces}
bin=$B/trainshim
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -x "$bin" ] || { echo "FAIL: $bin not built"; exit 1; }
trace=$TRACES/opt-zo-finetune.pickle
[ -r "$trace" ] || { echo "FAIL: $trace not readable"; exit 1; }
fail=0
for prov in auto fake; do
  full=$("$bin" replay "$trace" --provider $prov --json 2>/dev/null) || { echo "FAIL: $prov: unlimited replay"; fail=1; continue; }
  oom=$("$bin" replay "$trace" --provider $prov --device-memory 1G --json 2>/dev/null) || { echo "FAIL: $prov: limited replay"; fail=1; continue; }
  off=$("$bin" replay "$trace" --provider $prov --device-memory 1G --offload --json 2>/dev/null) || { echo "FAIL: $prov: offload replay"; fail=1; continue; }
  python3 - "$full" "$oom" "$off" "$prov" <<'PY' || fail=1
import json, sys
full, oom, off = (json.loads(x) for x in sys.argv[1:4])
prov, G, bad = sys.argv[4], 1 << 30, []
if full["ooms"] or full["peak_reserved_bytes"] <= G: bad.append("the unlimited replay must fit and need more than 1 GiB")
if not oom["ooms"]: bad.append("1 GiB without --offload: no OOM")
if oom.get("offload") is not False or oom.get("peak_host_bytes") != 0: bad.append("without --offload: host bytes %r" % oom.get("peak_host_bytes"))
if off["ooms"]: bad.append("with --offload: %d OOMs" % off["ooms"])
if off["peak_reserved_bytes"] != full["peak_reserved_bytes"]: bad.append("with --offload: peak reserved %d, unlimited %d" % (off["peak_reserved_bytes"], full["peak_reserved_bytes"]))
if off.get("peak_host_bytes") != full["peak_reserved_bytes"] - G: bad.append("host bytes %r, want peak reserved - 1 GiB = %d" % (off.get("peak_host_bytes"), full["peak_reserved_bytes"] - G))
for b in bad: print("FAIL %s: %s" % (prov, b))
if not bad: print("replay %s: 1 GiB device, %.2f GiB would have lived on the host, no OOM" % (prov, off["peak_host_bytes"] / G))
sys.exit(1 if bad else 0)
PY
done
exit $fail
