#!/usr/bin/env bash
# test_devmem_faults on a 256 MiB emulated device: filling the device, the
# error at exhaustion (and the runtime's last error), the data and the
# recovery after frees are the same without the shim, with the pool, and
# with driver failures injected into the pool's own calls (cuMemCreate's 3rd
# call out of memory; cuMemMap failing at random with OOM; cuMemMap failing
# with an unexpected error, which sends the shim to passthrough while the
# pool's pointers stay valid); after freeing everything and cudaDeviceReset
# no physical memory is left (checked by the program).  With
# TRAINSHIM_MEMORY_LIMIT=64MiB the pool stops at 4 x 16 MiB with one OOM
# report per failed allocation.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_faults
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} EMU_DEVICE_MEMORY=256MiB TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
"$prog" plain > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
grep -q "exhausted after 16 buffers: 2 (last error 2)" "$tmp/plain" || { echo "FAIL: unexpected plain run:"; cat "$tmp/plain"; exit 1; }
i=0
for spec in "" cuMemCreate:3:CUDA_ERROR_OUT_OF_MEMORY cuMemMap:p0.2:CUDA_ERROR_OUT_OF_MEMORY \
            cuMemCreate:p0.1:CUDA_ERROR_OUT_OF_MEMORY,cuMemMap:p0.1:CUDA_ERROR_OUT_OF_MEMORY cuMemMap:p0.3:CUDA_ERROR_UNKNOWN; do
  i=$((i + 1))
  for seed in 1 5; do
    EMU_SEED=$seed LD_PRELOAD="$shim" "$prog" faults "$spec" > "$tmp/f$i.$seed" 2> "$tmp/f$i.$seed.err" \
      || { echo "FAIL: run with faults '$spec' (seed $seed):"; cat "$tmp/f$i.$seed" "$tmp/f$i.$seed.err"; fail=1; continue; }
    diff "$tmp/plain" "$tmp/f$i.$seed" > /dev/null || { echo "FAIL: faults '$spec' (seed $seed) differ:"; diff "$tmp/plain" "$tmp/f$i.$seed"; fail=1; }
  done
done
grep -q "continuing in passthrough" "$tmp/f5.1.err" || { echo "FAIL: an unexpected driver error did not send the shim to passthrough:"; cat "$tmp/f5.1.err"; fail=1; }
TRAINSHIM_MEMORY_LIMIT=64MiB LD_PRELOAD="$shim" "$prog" limit > "$tmp/limit" 2> "$tmp/limit.err" \
  || { echo "FAIL: limit run:"; cat "$tmp/limit" "$tmp/limit.err"; fail=1; }
n=$(grep -c "^trainshim: out of memory on device 0: requested 16777216 bytes" "$tmp/limit.err")
[ "$n" = 3 ] || { echo "FAIL: want 3 OOM reports under the limit, got $n"; cat "$tmp/limit.err"; fail=1; }
[ $fail = 0 ] && echo "devmem faults ok"
exit $fail
