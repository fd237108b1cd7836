#!/usr/bin/env bash
# test_interpose_kernel (nvcc, <<<>>> and cudaLaunchKernel) under the shim,
# as built by the Makefile and rebuilt here with --default-stream per-thread:
# identical output with and without the shim, and every launch and copy
# reached the hook of the symbol the compiler chose (__cudaLaunchKernel or
# its _ptsz twin; cudaMemcpy or cudaMemcpy_ptds; ...).
set -u
B=${B:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
legacy=$B/tests/integration/test_interpose_kernel
shim=$PWD/$B/libtrainshim.so
for f in "$legacy" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
per_thread=$tmp/kernel_per_thread
"$NVCC" -O2 -cudart shared -Wno-deprecated-gpu-targets --default-stream per-thread -Itests/emu \
  -o "$per_thread" tests/integration/test_interpose_kernel.cu -L"$CUDA_HOME/lib64" -L"$B/emu" -lcuda \
  || { echo "FAIL: cannot build the per-thread variant"; exit 1; }
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
expect() {  # expect <symbol> <outermost calls>
  local got; got=$(awk -v n="$1" '$1 == n { v = $2 } END { print v + 0 }' "$counts")
  [ "$got" = "$2" ] || { echo "FAIL ($name): outermost calls of $1 = $got, want $2"; fail=1; }
}
for prog in "$legacy" "$per_thread"; do
  name=$(basename "$prog")
  "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL ($name): plain run failed:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
  counts=$tmp/counts.$name
  LD_PRELOAD="$shim" TRAINSHIM_DEBUG_COUNTS="$counts" "$prog" > "$tmp/shim" 2> "$tmp/shim.err" \
    || { echo "FAIL ($name): run under the shim failed:"; cat "$tmp/shim" "$tmp/shim.err"; exit 1; }
  diff "$tmp/plain" "$tmp/shim" > /dev/null || { echo "FAIL ($name): output differs under the shim:"; diff "$tmp/plain" "$tmp/shim"; fail=1; }
  [ -s "$counts" ] || { echo "FAIL ($name): no TRAINSHIM_DEBUG_COUNTS file"; exit 1; }
  if [ "$prog" = "$legacy" ]; then pt= ds= sz=; else pt=1 ds=_ptds sz=_ptsz; fi
  expect "__cudaLaunchKernel$sz" 1
  expect "cudaLaunchKernel$sz" 1
  expect "cudaMemcpy$ds" 2
  expect "cudaMemcpyAsync$sz" 1
  expect "cudaStreamSynchronize$sz" 1
  expect cudaMalloc 2
  expect cuLaunchKernel 0                  # the runtime's own launches are nested
  if [ -n "$pt" ]; then expect __cudaLaunchKernel 0; expect cudaMemcpy 0; fi
done
[ $fail = 0 ] && echo "ok: launches and copies seen through the symbols nvcc chose, legacy and per-thread"
exit $fail
