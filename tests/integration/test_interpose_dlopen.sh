#!/usr/bin/env bash
# test_interpose_dlopen under LD_PRELOAD=libtrainshim.so, built twice: by the
# Makefile (CUDA libraries also linked, so in the global scope) and here with
# only -ldl (every CUDA library loaded RTLD_LOCAL: dlsym(RTLD_NEXT) finds
# nothing and the shim must resolve through the handles).  Output must be
# identical with and without the shim, the calls made through dlsym,
# cudaGetDriverEntryPointByVersion and cuGetProcAddress must reach the hooks
# as outermost calls, and hooked symbols of libraries that are not loaded
# must answer "not supported" instead of crashing.
set -u
B=${B:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
linked=$B/tests/integration/test_interpose_dlopen
shim=$PWD/$B/libtrainshim.so
for f in "$linked" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
local_only=$tmp/dlopen_local
${CC:-gcc} -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$CUDA_HOME/include" \
  -o "$local_only" tests/integration/test_interpose_dlopen.c -ldl || { echo "FAIL: cannot build the -ldl-only variant"; exit 1; }
if readelf -d "$local_only" | grep -qE 'NEEDED.*lib(cuda|cudart|nccl|cublas)'; then
  echo "FAIL: the -ldl-only variant links a CUDA library"; exit 1
fi
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
outer() { awk -v n="$1" '$1 == n { v = $2 } END { print v + 0 }' "$counts"; }
expect() {  # expect <symbol> <op> <value>: outermost calls
  local got; got=$(outer "$1")
  if ! [ "$got" "$2" "$3" ]; then echo "FAIL ($name): outermost calls of $1 = $got, want $2 $3"; fail=1; fi
}
for prog in "$linked" "$local_only"; do
  name=$(basename "$prog")
  "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL ($name): plain run failed:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
  counts=$tmp/counts.$name
  LD_PRELOAD="$shim" TRAINSHIM_DEBUG_COUNTS="$counts" "$prog" > "$tmp/shim" 2> "$tmp/shim.err" \
    || { echo "FAIL ($name): run under the shim failed:"; cat "$tmp/shim" "$tmp/shim.err"; exit 1; }
  diff "$tmp/plain" "$tmp/shim" > /dev/null || { echo "FAIL ($name): output differs under the shim:"; diff "$tmp/plain" "$tmp/shim"; fail=1; }
  [ -s "$counts" ] || { echo "FAIL ($name): no TRAINSHIM_DEBUG_COUNTS file"; exit 1; }
  expect cudaMalloc -eq 1
  expect cudaMemcpy -eq 2
  expect cudaFree -eq 1
  expect cudaGetDriverEntryPointByVersion -eq 4
  # driver calls through pointers the runtime handed out: wrapped, outermost
  expect cuMemAlloc_v2 -eq 2                 # entry point + cuGetProcAddress(per-thread): no _ptds twin exists
  expect cuMemcpyHtoD_v2 -eq 1               # entry point
  expect cuMemcpyHtoD_v2_ptds -eq 1          # cuGetProcAddress with the per-thread flag
  expect cuMemcpyDtoH_v2 -eq 3               # entry point + dlsym(handle, "cuMemcpyDtoH_v2") + legacy cuGetProcAddress
  expect cuMemcpyHtoDAsync_v2_ptsz -eq 1     # cuGetProcAddress("cuMemcpyHtoDAsync", per-thread)
  expect cuGetProcAddress -ge 1              # the legacy 4-argument lookup, itself hooked
  expect cuMemFree_v2 -eq 3                  # entry point + dlsym'd twice (one a bad free)
  expect cuGetProcAddress_v2 -ge 2
done
# hooked symbols whose library is not loaded at all
"$local_only" missing > "$tmp/missing.plain" 2>&1 || { echo "FAIL: missing (plain) failed"; cat "$tmp/missing.plain"; exit 1; }
grep -qx absent "$tmp/missing.plain" || { echo "FAIL: NCCL/cuBLASLt unexpectedly present without the shim"; fail=1; }
LD_PRELOAD="$shim" "$local_only" missing > "$tmp/missing.shim" 2> "$tmp/missing.err" \
  || { echo "FAIL: a hooked symbol without its library crashed or failed:"; cat "$tmp/missing.shim" "$tmp/missing.err"; exit 1; }
grep -qx 'ncclGroupStart -> 5' "$tmp/missing.shim" || { echo "FAIL: ncclGroupStart without libnccl should return ncclInvalidUsage (5):"; cat "$tmp/missing.shim"; fail=1; }
grep -qx 'cublasLtMatmul -> 15' "$tmp/missing.shim" || { echo "FAIL: cublasLtMatmul without libcublasLt should return CUBLAS_STATUS_NOT_SUPPORTED (15):"; cat "$tmp/missing.shim"; fail=1; }
grep -qx 'cudaMemGetInfo via RTLD_DEFAULT: found, dlerror clean' "$tmp/missing.shim" || { echo "FAIL: RTLD_DEFAULT lookup of a hooked symbol of an RTLD_LOCAL library:"; cat "$tmp/missing.shim"; fail=1; }
grep -q 'trainshim: warning: ncclGroupStart' "$tmp/missing.err" || { echo "FAIL: no warning for the missing ncclGroupStart:"; cat "$tmp/missing.err"; fail=1; }
[ $fail = 0 ] && echo "ok: dlopen/dlsym/entry-point/cuGetProcAddress paths interposed, outputs identical, missing symbols answered"
exit $fail
