#!/usr/bin/env bash
# test_emu_coverage_torch: `scripts/emu-coverage.sh torch`, the table of CUDA
# symbols PyTorch's libraries need against what the emulator implements, on a
# stand-in torch package (a lib/ with one library built here: it imports an
# implemented runtime call, a runtime stub, an NCCL call and a cuDNN call,
# and names driver and NVML entry points as torch's lookup tables do).
# Without torch the command prints one clear line and succeeds.
set -u
cd "$(dirname "$0")/../../.." || exit 1
B=${B:-build}
fail=0
say() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$(TORCH_PYTHON="$tmp/no-python" bash scripts/emu-coverage.sh -b "$B" torch 2>&1) || say "without torch: exit $?"
case $out in "torch is not installed for $tmp/no-python"*) ;; *) say "without torch: '$out'";; esac

mkdir -p "$tmp/site/torch/lib"
echo '__version__ = "0.0.0+fake"' > "$tmp/site/torch/version.py"
: > "$tmp/site/torch/__init__.py"
cat > "$tmp/fake.c" <<'C'
#include <cuda_runtime_api.h>
#include <nccl.h>
int cudnnCreate(void **h);
const char *const driver_table[] = {"cuMemCreate", "cuMemGetAddressRange", "nvmlInit_v2", "nvmlDeviceGetTemperatureV"};
int use(void *p, cudaGraph_t g)
{
    cudaMalloc(&p, 16);
    cudaGraphAddNode(NULL, g, NULL, NULL, 0, NULL);
    ncclAllReduce(p, p, 1, ncclFloat, ncclSum, NULL, NULL);
    return cudnnCreate(&p);
}
C
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
cc -shared -fPIC -I"$CUDA_HOME/include" -o "$tmp/site/torch/lib/libtorch_cuda.so" "$tmp/fake.c" \
  -L"$CUDA_HOME/lib64" -lcudart -lnccl -Wl,--allow-shlib-undefined -Wl,--unresolved-symbols=ignore-all || {
  echo "FAIL: cannot build the stand-in library"; exit 1; }
out=$(PYTHONPATH="$tmp/site" bash scripts/emu-coverage.sh -b "$B" torch python3 2>&1) || say "torch table: exit $?"
echo "$out"
grep -q '^CUDA symbols torch 0.0.0+fake ' <<< "$out" || say "no heading with the version"
grep -q '^| cudart | 2 | 1 | 1 |$' <<< "$out" || say "cudart row"
grep -q '^| nccl | 1 | 1 | 0 |$' <<< "$out" || say "nccl row"
grep -q '^| cuda | 2 | 2 | 0 |$' <<< "$out" || say "cuda row (looked-up names, cuMemGetAddressRange as its _v2)"
grep -q '^| nvml | 2 | 1 | 1 |$' <<< "$out" || say "nvml row"
grep -q '^stub: cudart cudaGraphAddNode (libtorch_cuda.so)$' <<< "$out" || say "stub line"
grep -q '^stub: nvml nvmlDeviceGetTemperatureV (libtorch_cuda.so)$' <<< "$out" || say "nvml stub line"
[ $fail = 0 ] && echo "test_emu_coverage_torch: ok"
exit $fail
