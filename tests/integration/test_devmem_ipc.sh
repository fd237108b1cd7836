#!/usr/bin/env bash
# test_devmem_ipc: legacy CUDA IPC between two processes on the emulator
# (see test_devmem_ipc.c), in every pairing that matters:
#   pooled   A under the shim (expandable pool), B under the shim: trainshim's
#            own handles; after A frees a block its handle no longer opens;
#            a process without the shim gets an error, not memory.
#   off      A under the shim with TRAINSHIM_ALLOC=off, B under the shim: the
#            driver's handles pass through.
#   noshim   A without the shim, B under the shim: the same.
#   caching  A under the caching pool: its blocks are refused.
# Each under EMU_JITTER_US=50 with several seeds.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_ipc
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log" TEST_IPC_SHIM="$shim"
fail=0
run() {   # name, then the command
  local name=$1; shift
  if "$@" > "$tmp/$name.out" 2>&1; then
    grep -q "^ipc ok" "$tmp/$name.out" || { echo "FAIL: $name: no success line"; cat "$tmp/$name.out"; fail=1; }
  else
    echo "FAIL: $name:"; cat "$tmp/$name.out"; fail=1
  fi
}
for seed in 1 2 3; do
  run "pooled.$seed" env EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=expandable "$prog" pooled
  run "off.$seed" env EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=off "$prog"
  run "noshim.$seed" env EMU_SEED=$seed "$prog"
done
run caching env EMU_SEED=1 LD_PRELOAD="$shim" TRAINSHIM_ALLOC=caching "$prog" caching
[ $fail = 0 ] && echo "devmem ipc ok: pooled, off and no-shim exporters (seeds 1-3), caching refused"
exit $fail
