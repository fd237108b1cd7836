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
