#!/usr/bin/env bash
# test_devmem_peer on two emulated devices: cudaMemcpyPeer and a kernel on
# device 1 reading device 0's memory give the same output without the shim
# and under the pool (expandable: device 1 granted access to device 0's
# pages mapped before and after cudaDeviceEnablePeerAccess; caching).
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_peer
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
EMU_SEED=1 "$prog" > "$tmp/plain" 2>&1 || { echo "FAIL: plain run:"; cat "$tmp/plain"; exit 1; }
for seed in 1 5; do
  for mode in expandable caching; do
    arg=plain; [ $mode = expandable ] && arg=pool
    EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode "$prog" $arg > "$tmp/$mode.$seed" 2> "$tmp/$mode.$seed.err" \
      || { echo "FAIL: $mode run (seed $seed):"; cat "$tmp/$mode.$seed" "$tmp/$mode.$seed.err"; fail=1; continue; }
    diff "$tmp/plain" "$tmp/$mode.$seed" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$tmp/$mode.$seed"; fail=1; }
  done
done
[ $fail = 0 ] && echo "devmem peer ok: $(tr '\n' ' ' < "$tmp/plain")"
exit $fail
