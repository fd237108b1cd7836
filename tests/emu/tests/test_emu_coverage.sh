#!/usr/bin/env bash
# test_emu_coverage: the emulator implements what its README promises and what
# trainshim and its workloads need, read from the built libraries in $B/emu
# (scripts/emu-coverage.sh tells an implementation from a generated stub).
# Fails when:
#   - an export of a real library is missing from the emulated one (a program
#     linked against the toolkit would not load);
#   - an entry point listed as supported in tests/emu/README.md (the section
#     between the emu-coverage markers) is a stub, or is not an export at all;
#   - one of the entry points below, needed by trainshim, PyTorch/JAX-style
#     frameworks and our workloads, is a stub;
#   - a symbol that a built workload ($B/workloads/*) imports from an emulated
#     library is a stub (an unbuilt workload is a failure: build with `make tests`);
#   - cuGetProcAddress, the way the runtime, NCCL, cuBLAS and frameworks reach
#     the driver, resolves a needed driver entry point to anything but its
#     implementation (or, with the per-thread flag, not to the _ptsz variant);
#   - its version table (tests/emu/common/proc_versions.c) is not what
#     scripts/gen-emu-proc-versions.py generates from this toolkit's headers
#     and symbols/cuda.txt (rerun the script and commit the result).
# Implemented entry points the README does not list yet are only reported.
set -u
cd "$(dirname "$0")/../../.." || exit 1
B=${B:-build}
case $B in /*) babs=$B ;; *) babs=$PWD/$B ;; esac
cov=scripts/emu-coverage.sh
readme=tests/emu/README.md
fail=0
say() { echo "FAIL: $*"; fail=1; }

for so in libcuda.so.1 libcudart.so.13 libnccl.so.2 libcublas.so.13 libcublasLt.so.13 libnvidia-ml.so.1; do
  [ -f "$B/emu/$so" ] || { echo "FAIL: $B/emu/$so is not built (make B=$B emu)"; exit 1; }
done
status=$(bash "$cov" -b "$B" status) || { echo "FAIL: $cov status failed"; exit 1; }
status=$(printf '%s\n%s\n' "$status" "$(bash "$cov" -b "$B" status emu)")
# status lines: "lib name impl|stub|missing", kept in a table for lookups
declare -A ST
while read -r l n s; do ST["$l $n"]=$s; done <<< "$status"

# ---- 1. every export of every real library is there (stub or not)
missing=$(printf '%s\n' "$status" | awk '$3 == "missing" {print $1 ": " $2}')
[ -z "$missing" ] || say "exports missing from the emulated libraries:
$missing"

# ---- 2. what the README lists as supported is implemented
[ -f "$readme" ] || { echo "FAIL: $readme missing"; exit 1; }
listed=$(awk '
  /<!-- emu-coverage:begin -->/ { on = 1; next }
  /<!-- emu-coverage:end -->/ { on = 0 }
  !on { next }
  /^### / {
    if ($0 ~ /^### emu/) lib = "emu"
    else if (match($0, /\([A-Za-z]+\)/)) lib = substr($0, RSTART + 1, RLENGTH - 2)
    else lib = "?"
    next
  }
  {
    s = $0
    while (match(s, /`[A-Za-z_][A-Za-z0-9_]*`/)) {
      print lib, substr(s, RSTART + 1, RLENGTH - 2)
      s = substr(s, RSTART + RLENGTH)
    }
  }' "$readme")
nlisted=$(printf '%s\n' "$listed" | grep -c . || true)
[ "$nlisted" -ge 100 ] || say "$readme lists only $nlisted entry points between the emu-coverage markers"
bad_listed=$(while read -r lib name; do
  [ -n "$name" ] || continue
  # the NCCL note names the pncclX aliases generically: `ncclX`/`pncclX`
  case $name in ncclX | pncclX) continue ;; esac
  s=${ST["$lib $name"]:-}
  [ "$s" = impl ] || echo "  $lib $name: ${s:-not an export of $lib}"
done <<< "$listed")
[ -z "$bad_listed" ] || say "entry points $readme lists as supported are not implemented:
$bad_listed"
unlisted=$(printf '%s\n' "$status" | awk '$3 == "impl" && $2 !~ /^pnccl/ {print $1, $2}' |
  grep -vxF -f <(printf '%s\n' "$listed") || true)
if [ -n "$unlisted" ]; then
  echo "note: implemented but not yet listed in $readme (run scripts/emu-coverage.sh update-readme):"
  printf '%s\n' "$unlisted" | sed 's/^/  /'
fi

# ---- 3. entry points trainshim, frameworks and workloads need
need() {
  local lib=$1; shift
  for n in "$@"; do
    [ -n "$n" ] || continue
    s=${ST["$lib $n"]:-}
    [ "$s" = impl ] || say "needed entry point $lib $n is ${s:-not an export}"
  done
}
need cudart cudaMalloc cudaFree cudaMallocAsync cudaMallocAsync_ptsz cudaFreeAsync cudaFreeAsync_ptsz \
  cudaMallocFromPoolAsync cudaMallocHost cudaHostAlloc cudaFreeHost cudaHostRegister cudaHostUnregister \
  cudaMallocManaged cudaMallocPitch cudaMemGetInfo cudaPointerGetAttributes \
  cudaMemcpy cudaMemcpy_ptds cudaMemcpyAsync cudaMemcpyAsync_ptsz cudaMemcpy2D cudaMemcpy2DAsync \
  cudaMemcpyPeer cudaMemcpyPeerAsync cudaMemset cudaMemsetAsync \
  cudaLaunchKernel cudaLaunchKernel_ptsz cudaLaunchKernelExC __cudaLaunchKernel __cudaLaunchKernel_ptsz \
  __cudaGetKernel __cudaPushCallConfiguration __cudaPopCallConfiguration __cudaRegisterFatBinary \
  __cudaRegisterFatBinaryEnd __cudaRegisterFunction __cudaRegisterVar __cudaUnregisterFatBinary \
  cudaFuncGetParamInfo cudaLaunchHostFunc \
  cudaGetDeviceCount cudaGetDevice cudaSetDevice cudaGetDeviceProperties cudaDeviceGetAttribute \
  cudaDeviceSynchronize cudaDeviceReset cudaDeviceGetStreamPriorityRange cudaDriverGetVersion cudaRuntimeGetVersion \
  cudaStreamCreate cudaStreamCreateWithFlags cudaStreamCreateWithPriority cudaStreamDestroy \
  cudaStreamSynchronize cudaStreamQuery cudaStreamWaitEvent \
  cudaEventCreate cudaEventCreateWithFlags cudaEventRecord cudaEventQuery cudaEventSynchronize \
  cudaEventElapsedTime cudaEventDestroy \
  cudaStreamBeginCapture cudaStreamEndCapture cudaStreamIsCapturing cudaStreamGetCaptureInfo \
  cudaThreadExchangeStreamCaptureMode cudaGraphInstantiate cudaGraphLaunch cudaGraphExecDestroy cudaGraphDestroy \
  cudaDeviceGetDefaultMemPool cudaMemPoolSetAttribute cudaMemPoolGetAttribute cudaMemPoolTrimTo \
  cudaMemPrefetchAsync cudaMemAdvise cudaIpcGetMemHandle cudaIpcOpenMemHandle cudaIpcCloseMemHandle \
  cudaGetLastError cudaPeekAtLastError cudaGetErrorString cudaGetErrorName \
  cudaGetDriverEntryPoint cudaGetDriverEntryPointByVersion
need cuda cuInit cuDriverGetVersion cuGetProcAddress cuGetProcAddress_v2 cuGetErrorString cuGetErrorName \
  cuDeviceGet cuDeviceGetCount cuDeviceGetAttribute cuDeviceGetName cuDeviceTotalMem_v2 \
  cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxGetState cuDevicePrimaryCtxReset_v2 \
  cuCtxGetCurrent cuCtxSetCurrent cuCtxGetDevice cuCtxSynchronize \
  cuMemAlloc_v2 cuMemFree_v2 cuMemGetInfo_v2 cuMemGetAddressRange_v2 cuMemHostAlloc cuMemFreeHost \
  cuMemHostRegister_v2 cuMemHostUnregister cuMemAllocManaged cuPointerGetAttribute cuPointerGetAttributes \
  cuMemAddressReserve cuMemAddressFree cuMemCreate cuMemRelease cuMemMap cuMemUnmap cuMemSetAccess \
  cuMemGetAccess cuMemGetAllocationGranularity cuMemGetAllocationPropertiesFromHandle \
  cuMemExportToShareableHandle cuMemImportFromShareableHandle cuMemRetainAllocationHandle \
  cuMemAllocAsync cuMemFreeAsync cuMemAllocFromPoolAsync cuMemPoolTrimTo cuDeviceGetDefaultMemPool \
  cuMemcpy cuMemcpyAsync cuMemcpyHtoD_v2 cuMemcpyDtoH_v2 cuMemcpyHtoDAsync_v2 cuMemcpyDtoHAsync_v2 \
  cuMemcpyDtoDAsync_v2 cuMemsetD8_v2 cuMemsetD8Async cuMemsetD32Async \
  cuStreamCreate cuStreamDestroy_v2 cuStreamSynchronize cuStreamQuery cuStreamWaitEvent \
  cuEventCreate cuEventRecord cuEventSynchronize cuEventQuery cuEventDestroy_v2 \
  cuLaunchKernel cuLaunchKernelEx cuLaunchHostFunc cuFuncGetParamInfo cuModuleLoadData cuModuleGetFunction \
  cuLibraryLoadData cuLibraryGetKernel cuKernelGetFunction \
  cuStreamBeginCapture_v2 cuStreamEndCapture cuStreamIsCapturing cuStreamGetCaptureInfo_v3 \
  cuThreadExchangeStreamCaptureMode cuGraphInstantiateWithFlags cuGraphLaunch \
  cuIpcGetMemHandle cuIpcOpenMemHandle_v2 cuIpcCloseMemHandle
need nccl ncclGetVersion ncclGetUniqueId ncclGetErrorString ncclCommInitRank ncclCommInitRankConfig \
  ncclCommInitAll ncclCommSplit ncclCommDestroy ncclCommAbort ncclCommFinalize ncclCommCount \
  ncclCommUserRank ncclCommCuDevice ncclCommGetAsyncError \
  ncclAllReduce ncclBroadcast ncclBcast ncclReduce ncclAllGather ncclReduceScatter ncclAlltoAll \
  ncclGather ncclScatter ncclSend ncclRecv ncclGroupStart ncclGroupEnd \
  ncclMemAlloc ncclMemFree ncclCommRegister ncclCommDeregister ncclRedOpCreatePreMulSum ncclRedOpDestroy \
  pncclAllReduce pncclGroupEnd
need cublas cublasCreate_v2 cublasDestroy_v2 cublasSetStream_v2 cublasGetStream_v2 cublasSetWorkspace_v2 \
  cublasSetMathMode cublasSetPointerMode_v2 cublasSgemm_v2 cublasSgemm_v2_64 cublasDgemm_v2 cublasHgemm \
  cublasGemmEx cublasGemmBatchedEx cublasGemmStridedBatchedEx cublasSgemmStridedBatched \
  cublasSgemmBatched cublasGetStatusString
need cublasLt cublasLtCreate cublasLtDestroy cublasLtMatmul cublasLtMatmulAlgoGetHeuristic \
  cublasLtMatmulDescCreate cublasLtMatmulDescDestroy cublasLtMatmulDescSetAttribute cublasLtMatmulDescGetAttribute \
  cublasLtMatrixLayoutCreate cublasLtMatrixLayoutDestroy cublasLtMatrixLayoutSetAttribute \
  cublasLtMatrixLayoutGetAttribute cublasLtMatmulPreferenceCreate cublasLtMatmulPreferenceSetAttribute \
  cublasLtMatmulPreferenceDestroy
# what PyTorch calls at start-up, for expandable segments, cudaMallocAsync and CUDA graphs
need cuda cuLogsRegisterCallback cuLogsUnregisterCallback cuDeviceGetGraphMemAttribute cuGraphGetNodes \
  cuOccupancyMaxActiveBlocksPerMultiprocessor cuFuncGetAttribute
need cudart cudaDeviceGetGraphMemAttribute cudaGraphGetNodes cudaFuncGetAttributes \
  cudaOccupancyMaxActiveBlocksPerMultiprocessor
need nvml nvmlInit_v2 nvmlShutdown nvmlDeviceGetCount_v2 nvmlDeviceGetHandleByIndex_v2 \
  nvmlDeviceGetHandleByPciBusId_v2 nvmlDeviceGetName nvmlDeviceGetUUID nvmlDeviceGetMemoryInfo \
  nvmlDeviceGetMemoryInfo_v2 nvmlDeviceGetGpuFabricInfoV nvmlDeviceGetComputeRunningProcesses \
  nvmlDeviceGetComputeRunningProcesses_v3 nvmlSystemGetCudaDriverVersion_v2 nvmlErrorString
mapfile -t emu_names < tests/emu/symbols/emu.txt
need emu "${emu_names[@]}"

# ---- 4. what the built workloads import
nwork=0
for src in tests/workloads/*.cu; do
  [ -f "$src" ] || continue
  bin=$B/workloads/$(basename "$src" .cu)
  if [ ! -x "$bin" ]; then say "workload $bin is not built (make B=$B tests)"; continue; fi
  nwork=$((nwork + 1))
  while read -r sym; do
    name=${sym%%@*} ver=${sym#*@}
    [ "$ver" = "$sym" ] && ver=
    lib=
    case $ver in
      libcudart.so.13) lib=cudart ;; libcublas.so.13) lib=cublas ;; libcublasLt.so.13) lib=cublasLt ;;
      libcupti.so.13) lib=cupti ;;
      "") for l in nccl cuda; do [ -n "${ST["$l $name"]:-}" ] && lib=$l && break; done ;;
    esac
    [ -n "$lib" ] || continue
    s=${ST["$lib $name"]:-}
    [ "$s" = impl ] || say "workload $bin imports $lib $name, which is ${s:-not an export}"
  done < <(nm -D --undefined-only "$bin" | awk '{print $NF}')
done

# ---- 5. cuGetProcAddress hands out the implementations
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/probe.c" <<'EOF'
/* argv[1]: the driver; argv[2..]: "name" or "name:pt" (per-thread flag).
 * Prints "name resolved-symbol" for each, or "name NOT-FOUND rc". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
typedef int (*get_proc_fn)(const char *, void **, int, unsigned long long, int *);
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("DLOPEN-FAILED %s\n", dlerror()); return 1; }
    get_proc_fn gp = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!gp) { printf("NO-cuGetProcAddress_v2\n"); return 1; }
    for (int i = 2; i < argc; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", argv[i]);
        unsigned long long flags = 0;
        char *colon = strchr(name, ':');
        if (colon) { *colon = 0; flags = 2; }   /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
        void *fn = NULL;
        int st = -1;
        int rc = gp(name, &fn, 12000, flags, &st);
        Dl_info info;
        if (rc != 0 || !fn || !dladdr(fn, &info) || !info.dli_sname || info.dli_saddr != fn)
            printf("%s NOT-FOUND %d\n", argv[i], rc);
        else
            printf("%s %s\n", argv[i], info.dli_sname);
    }
    return 0;
}
EOF
if ! cc -o "$tmp/probe" "$tmp/probe.c" -ldl 2>"$tmp/cc.log"; then
  say "cannot compile the cuGetProcAddress probe: $(cat "$tmp/cc.log")"
else
  # base name as frameworks ask -> the symbol that must answer
  probes="cuMemAlloc=cuMemAlloc_v2 cuMemFree=cuMemFree_v2 cuMemGetInfo=cuMemGetInfo_v2
    cuMemCreate=cuMemCreate cuMemMap=cuMemMap cuMemUnmap=cuMemUnmap cuMemSetAccess=cuMemSetAccess
    cuMemAddressReserve=cuMemAddressReserve cuMemAddressFree=cuMemAddressFree cuMemRelease=cuMemRelease
    cuMemGetAllocationGranularity=cuMemGetAllocationGranularity
    cuMemExportToShareableHandle=cuMemExportToShareableHandle
    cuMemImportFromShareableHandle=cuMemImportFromShareableHandle
    cuMemGetAddressRange=cuMemGetAddressRange_v2 cuMemRetainAllocationHandle=cuMemRetainAllocationHandle
    cuDevicePrimaryCtxGetState=cuDevicePrimaryCtxGetState cuDevicePrimaryCtxRelease=cuDevicePrimaryCtxRelease_v2
    cuCtxGetCurrent=cuCtxGetCurrent cuCtxSynchronize=cuCtxSynchronize cuStreamSynchronize=cuStreamSynchronize
    cuLaunchKernel=cuLaunchKernel cuLaunchHostFunc=cuLaunchHostFunc cuMemcpyHtoDAsync=cuMemcpyHtoDAsync_v2
    cuMemAllocAsync=cuMemAllocAsync cuMemFreeAsync=cuMemFreeAsync cuGetProcAddress=cuGetProcAddress_v2
    cuMemcpyAsync:pt=cuMemcpyAsync_ptsz cuStreamSynchronize:pt=cuStreamSynchronize_ptsz
    cuLaunchKernel:pt=cuLaunchKernel_ptsz cuMemcpyHtoD:pt=cuMemcpyHtoD_v2_ptds
    emuRegisterKernel=emuRegisterKernel emuGetCounter=emuGetCounter"
  args=() want=()
  for p in $probes; do args+=("${p%%=*}"); want+=("${p#*=}"); done
  out=$(LD_LIBRARY_PATH="$babs/emu" "$tmp/probe" "$babs/emu/libcuda.so.1" "${args[@]}" 2>&1) ||
    { say "the cuGetProcAddress probe failed: $out"; args=(); }
  for i in "${!args[@]}"; do
    got=$(printf '%s\n' "$out" | awk -v a="${args[$i]}" '$1 == a {print $2; exit}')
    if [ "$got" != "${want[$i]}" ]; then
      say "cuGetProcAddress_v2(\"${args[$i]}\") resolved to '${got:-nothing}', want ${want[$i]}"
      continue
    fi
    lib=cuda; case $got in emu*) lib=emu ;; esac
    s=${ST["$lib $got"]:-}
    [ "$s" = impl ] || say "cuGetProcAddress_v2(\"${args[$i]}\") hands out $got, which is ${s:-not an export}"
  done
fi

# ---- 6. the cuGetProcAddress version table is current
if command -v python3 > /dev/null; then
  fresh=$(python3 scripts/gen-emu-proc-versions.py "${CUDA_HOME:-/usr/local/cuda}" 2>&1) ||
    say "scripts/gen-emu-proc-versions.py failed: $fresh"
  [ "$fresh" = "$(cat tests/emu/common/proc_versions.c)" ] ||
    say "tests/emu/common/proc_versions.c is stale: python3 scripts/gen-emu-proc-versions.py > tests/emu/common/proc_versions.c"
else
  say "python3 is needed to check the cuGetProcAddress version table"
fi

echo "checked: $nlisted README entries, $nwork workload(s), $(printf '%s\n' "$status" | awk '$3 == "impl"' | grep -c .) implemented exports"
[ $fail = 0 ] && echo "test_emu_coverage: ok"
exit $fail
