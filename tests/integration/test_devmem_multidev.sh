#!/usr/bin/env bash
# test_devmem_multidev on two emulated devices, one thread driving both:
# allocations on the stream's device whichever is current, frees ordered on
# the other device's stream, synchronous frees from the other device.  Same
# output without the shim and under the pool (expandable and caching), under
# emulator delays, and no passthrough fallback.
set -u
B=${B:-build}
. "$(dirname "$0")/same_with_shim.sh"
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-200}
same_with_shim test_devmem_multidev 1 7
rc=$?
# the report gives each device its own line (the totals are the process's):
# device 1 held its eight 1-8 MiB buffers at once, device 0 one 3 MiB buffer
# (device 1's own pool's 5 MiB are logged on device 1, not the current 0)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
EMU_SEED=1 LD_PRELOAD="$PWD/$B/libtrainshim.so" TRAINSHIM_LOG="$tmp/log.%p" "$B/tests/integration/test_devmem_multidev" > /dev/null 2>&1 \
  || { echo "FAIL: logged run"; exit 1; }
"$B/trainshim" report --format json "$tmp"/log.* | python3 -c '
import json, sys
devs = {d["device"]: d for d in json.load(sys.stdin)["memory"]["pool_devices"]}
assert sorted(devs) == [0, 1], devs
assert devs[1]["peak_allocated_bytes"] == 36 << 20 and devs[0]["peak_allocated_bytes"] == 3 << 20, devs
assert all(d["pool_peak_reserved_bytes"] >= d["peak_allocated_bytes"] for d in devs.values()), devs
' || { echo "FAIL: the report's devices"; "$B/trainshim" report "$tmp"/log.* | sed -n "/DEVICE MEMORY/,/allocator/p"; rc=1; }
"$B/trainshim" report "$tmp"/log.* | grep -q "^  device 1 .*peak allocated 36.00 MiB" || { echo "FAIL: no device line in the text report"; rc=1; }
exit $rc
