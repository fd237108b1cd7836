#!/usr/bin/env bash
# test_devmem_current_device on two emulated devices: the runtime's
# allocations land on the current device however it was made current, the
# same without the shim and under the pool (expandable and caching), under
# emulator delays; then again with the driver handing out internal entry
# points for its context calls (EMU_PROC_INTERNAL=1), which no hook sees.
# And the current device kept per thread is used: 1000 allocations without a
# switch ask the driver for it a few times at most (the pool's own fence
# checks ask), and every time once an unseen context call was handed out.
set -u
B=${B:-build}
. "$(dirname "$0")/same_with_shim.sh"
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-100}
rc=0
same_with_shim test_devmem_current_device 1 5 || rc=1
EMU_PROC_INTERNAL=1 same_with_shim test_devmem_current_device 3 || rc=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
asks() { # asks [ENV=V...]: the driver's answers to 1000 allocations under the shim
  env "$@" TEST_ASKS_FILE="$tmp/asks" LD_PRELOAD="$PWD/$B/libtrainshim.so" TRAINSHIM_LOG=off \
    "$B/tests/integration/test_devmem_current_device" > "$tmp/out" 2>&1 || { echo "FAIL: run $*:"; cat "$tmp/out"; return 1; }
  cat "$tmp/asks"
}
kept=$(asks) || rc=1
[ "${kept:-x}" -lt 20 ] 2> /dev/null || { echo "FAIL: the current device was asked $kept times in 1000 allocations"; rc=1; }
unseen=$(asks EMU_PROC_INTERNAL=1) || rc=1
[ "${unseen:-0}" -ge 1000 ] 2> /dev/null \
  || { echo "FAIL: with unseen context calls handed out, asked $unseen times in 1000 allocations"; rc=1; }
[ $rc = 0 ] && echo "current device asked: $kept times in 1000 allocations; $unseen with unseen context calls"
exit $rc
