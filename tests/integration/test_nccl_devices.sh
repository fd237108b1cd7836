#!/usr/bin/env bash
# test_nccl_devices: one thread drives two devices' NCCL ranks.  Same
# output without and under the shim; under the shim with every call timed
# (TRAINSHIM_FLOP_SAMPLE=1) the report times all 10 calls of each rank (the
# other device's samples used to fail: their events were the current
# context's) and prints n/a, not 0.000, for a communicator never timed.
set -u
B=${B:-build}
prog=$B/tests/integration/test_nccl_devices
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim" "$B/trainshim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-50}
"$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
TRAINSHIM_FLOP_SAMPLE=1 TRAINSHIM_LOG="$tmp/log.%p" LD_PRELOAD="$shim" "$prog" > "$tmp/shim" 2> "$tmp/shim.err" \
  || { echo "FAIL: run under the shim:"; cat "$tmp/shim" "$tmp/shim.err"; exit 1; }
diff "$tmp/plain" "$tmp/shim" || { echo "FAIL: output differs under the shim"; exit 1; }
"$B/trainshim" report --format json "$tmp"/log.* | python3 -c '
import json, sys
comms = json.load(sys.stdin)["nccl"]["communicators"]
assert sorted(c["rank"] for c in comms) == [0, 1], comms
for c in comms:
    assert c["calls"] == 10 and c["timed_calls"] == 10 and c["timed_gpu_ns"] > 0, c
' || { echo "FAIL: not every rank timed:"; "$B/trainshim" report "$tmp"/log.* | sed -n "/COMMUNICATION/,/time in/p"; exit 1; }
TRAINSHIM_FLOP_SAMPLE=0 TRAINSHIM_LOG="$tmp/untimed.%p" LD_PRELOAD="$shim" "$prog" > /dev/null 2>&1 || { echo "FAIL: untimed run"; exit 1; }
"$B/trainshim" report "$tmp"/untimed.* | grep -q "^[0-9a-f]\{16\} .* 0 \+n/a$" \
  || { echo "FAIL: an untimed communicator does not read n/a:"; "$B/trainshim" report "$tmp"/untimed.* | sed -n "/COMMUNICATION/,/time in/p"; exit 1; }
echo "nccl devices ok: $(cat "$tmp/plain")"
