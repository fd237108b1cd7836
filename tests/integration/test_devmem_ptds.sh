#!/usr/bin/env bash
# test_devmem_ptds: per-thread default streams of different threads are
# different streams: a block freed on one thread's behind a late kernel is
# not another thread's before the kernel ran.  Same output without the shim
# and under the pool (expandable and caching), two seeds.
set -u
B=${B:-build}
. "$(dirname "$0")/same_with_shim.sh"
export EMU_JITTER_US=${EMU_JITTER_US:-50}
same_with_shim test_devmem_ptds 1 3
