/* Names and messages of every cudaError_t (from the CUDA 13 driver_types.h
 * enum; messages of common errors are the real runtime's words, the rest the
 * header's description), and cudaGetErrorName/cudaGetErrorString. */
#include <stddef.h>
#include "rt_internal.h"

struct rt_error_text { int code; const char *name; const char *text; };

static const struct rt_error_text rt_error_table[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {4, "cudaErrorCudartUnloading", "driver shutting down"},
    {5, "cudaErrorProfilerDisabled", "this indicates profiler is not initialized for this run"},
    {6, "cudaErrorProfilerNotInitialized", "this error return is deprecated as of CUDA 5.0. It is no longer an error to attempt to enable/disable the..."},
    {7, "cudaErrorProfilerAlreadyStarted", "this error return is deprecated as of CUDA 5.0. It is no longer an error to call cudaProfilerStart() when..."},
    {8, "cudaErrorProfilerAlreadyStopped", "this error return is deprecated as of CUDA 5.0. It is no longer an error to call cudaProfilerStop() when..."},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {12, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {13, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {16, "cudaErrorInvalidHostPointer", "at least one host pointer passed to the API call is not a valid host pointer"},
    {17, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {18, "cudaErrorInvalidTexture", "the texture passed to the API call is not a valid texture"},
    {19, "cudaErrorInvalidTextureBinding", "the texture binding is not valid"},
    {20, "cudaErrorInvalidChannelDescriptor", "the channel descriptor passed to the API call is not valid"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {22, "cudaErrorAddressOfConstant", "this indicated that the user has taken the address of a constant variable, which was forbidden up until..."},
    {23, "cudaErrorTextureFetchFailed", "this indicated that a texture fetch was not able to be performed"},
    {24, "cudaErrorTextureNotBound", "this indicated that a texture was not bound for access"},
    {25, "cudaErrorSynchronizationError", "this indicated that a synchronization operation had failed"},
    {26, "cudaErrorInvalidFilterSetting", "a non-float texture was being accessed with linear filtering"},
    {27, "cudaErrorInvalidNormSetting", "an attempt was made to read an unsupported data type as a normalized float"},
    {28, "cudaErrorMixedDeviceExecution", "mixing of device and device emulation code was not allowed"},
    {31, "cudaErrorNotYetImplemented", "the API call is not yet implemented"},
    {32, "cudaErrorMemoryValueTooLarge", "this indicated that an emulated device pointer exceeded the 32-bit address range"},
    {34, "cudaErrorStubLibrary", "CUDA driver is a stub library"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {36, "cudaErrorCallRequiresNewerDriver", "the API call requires a newer CUDA driver than the one currently installed"},
    {37, "cudaErrorInvalidSurface", "the surface passed to the API call is not a valid surface"},
    {43, "cudaErrorDuplicateVariableName", "multiple global or constant variables (across separate CUDA source files in the application) share the..."},
    {44, "cudaErrorDuplicateTextureName", "multiple textures (across separate CUDA source files in the application) share the same string name"},
    {45, "cudaErrorDuplicateSurfaceName", "multiple surfaces (across separate CUDA source files in the application) share the same string name"},
    {46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
    {49, "cudaErrorIncompatibleDriverContext", "the current context is not compatible with this the CUDA Runtime"},
    {52, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {53, "cudaErrorPriorLaunchFailure", "this indicated that a previous kernel launch failed"},
    {65, "cudaErrorLaunchMaxDepthExceeded", "a device runtime grid launch did not occur because the depth of the child grid would exceed the maximum..."},
    {66, "cudaErrorLaunchFileScopedTex", "a grid launch did not occur because the kernel uses file-scoped textures which are unsupported by the..."},
    {67, "cudaErrorLaunchFileScopedSurf", "a grid launch did not occur because the kernel uses file-scoped surfaces which are unsupported by the..."},
    {68, "cudaErrorSyncDepthExceeded", "a call to cudaDeviceSynchronize made from the device runtime failed because the call was made at grid..."},
    {69, "cudaErrorLaunchPendingCountExceeded", "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {102, "cudaErrorDeviceNotLicensed", "the device doesn't have a valid Grid License"},
    {103, "cudaErrorSoftwareValidityNotEstablished", "by default, the CUDA runtime may perform a minimal set of self-tests, as well as CUDA driver tests, to..."},
    {127, "cudaErrorStartupFailure", "this indicates an internal startup failure in the CUDA runtime"},
    {200, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {205, "cudaErrorMapBufferObjectFailed", "the buffer object could not be mapped"},
    {206, "cudaErrorUnmapBufferObjectFailed", "the buffer object could not be unmapped"},
    {207, "cudaErrorArrayIsMapped", "the specified array is currently mapped and thus cannot be destroyed"},
    {208, "cudaErrorAlreadyMapped", "the resource is already mapped"},
    {209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
    {210, "cudaErrorAlreadyAcquired", "a resource has already been acquired"},
    {211, "cudaErrorNotMapped", "a resource is not mapped"},
    {212, "cudaErrorNotMappedAsArray", "a mapped resource is not available for access as an array"},
    {213, "cudaErrorNotMappedAsPointer", "a mapped resource is not available for access as a pointer"},
    {214, "cudaErrorECCUncorrectable", "an uncorrectable ECC error was detected during execution"},
    {215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {216, "cudaErrorDeviceAlreadyInUse", "a call tried to access an exclusive-thread device that is already in use by a different thread"},
    {217, "cudaErrorPeerAccessUnsupported", "P2P access is not supported across the given devices"},
    {218, "cudaErrorInvalidPtx", "A PTX compilation failed"},
    {219, "cudaErrorInvalidGraphicsContext", "this indicates an error with the OpenGL or DirectX context"},
    {220, "cudaErrorNvlinkUncorrectable", "an uncorrectable NVLink error was detected during the execution"},
    {221, "cudaErrorJitCompilerNotFound", "the PTX JIT compiler library was not found"},
    {222, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain"},
    {223, "cudaErrorJitCompilationDisabled", "the JIT compilation was disabled"},
    {224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported by the device"},
    {225, "cudaErrorUnsupportedDevSideSync", "the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize"},
    {226, "cudaErrorContained", "an exception occurred on the device that is now contained by the GPU's error containment capability"},
    {300, "cudaErrorInvalidSource", "the device kernel source is invalid"},
    {301, "cudaErrorFileNotFound", "the file specified was not found"},
    {302, "cudaErrorSharedObjectSymbolNotFound", "a link to a shared object failed to resolve"},
    {303, "cudaErrorSharedObjectInitFailed", "initialization of a shared object failed"},
    {304, "cudaErrorOperatingSystem", "an OS call failed"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {402, "cudaErrorLossyQuery", "this indicates an attempt was made to introspect an object in a way that would discard semantically..."},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "cudaErrorNotReady", "device not ready"},
    {700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {703, "cudaErrorLaunchIncompatibleTexturing", "this error indicates a kernel launch that uses an incompatible texturing mode"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process"},
    {709, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {710, "cudaErrorAssert", "device-side assert triggered"},
    {711, "cudaErrorTooManyPeers", "peer mapping resources exhausted"},
    {712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {714, "cudaErrorHardwareStackError", "unspecified launch failure"},
    {715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {716, "cudaErrorMisalignedAddress", "misaligned address"},
    {717, "cudaErrorInvalidAddressSpace", "while executing a kernel, the device encountered an instruction which can only operate on memory locations..."},
    {718, "cudaErrorInvalidPc", "invalid program counter"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {721, "cudaErrorTensorMemoryLeak", "an exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not..."},
    {800, "cudaErrorNotPermitted", "operation not permitted"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {802, "cudaErrorSystemNotReady", "the system is not yet ready to start any CUDA work"},
    {803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination"},
    {804, "cudaErrorCompatNotSupportedOnDevice", "the system was upgraded to run with forward compatibility but the visible hardware detected by CUDA does..."},
    {805, "cudaErrorMpsConnectionFailed", "the MPS client failed to connect to the MPS control daemon or the MPS server"},
    {806, "cudaErrorMpsRpcFailure", "the remote procedural call between the MPS server and the MPS client failed"},
    {807, "cudaErrorMpsServerNotReady", "the MPS server is not ready to accept new MPS client requests"},
    {808, "cudaErrorMpsMaxClientsReached", "the hardware resources required to create MPS client have been exhausted"},
    {809, "cudaErrorMpsMaxConnectionsReached", "this error indicates the the hardware resources required to device connections have been exhausted"},
    {810, "cudaErrorMpsClientTerminated", "the MPS client has been terminated by the server"},
    {811, "cudaErrorCdpNotSupported", "this error indicates, that the program is using CUDA Dynamic Parallelism, but the current configuration,..."},
    {812, "cudaErrorCdpVersionMismatch", "this error indicates, that the program contains an unsupported interaction between different versions of..."},
    {900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
    {909, "cudaErrorTimeout", "wait operation timed out"},
    {910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to..."},
    {911, "cudaErrorExternalDevice", "an async error has occurred in a device outside of CUDA. If CUDA was waiting for an external device's..."},
    {912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration"},
    {913, "cudaErrorFunctionNotLoaded", "indiciates a function handle is not loaded when calling an API that requires a loaded function"},
    {914, "cudaErrorInvalidResourceType", "this error indicates one or more resources passed in are not valid resource types for the operation"},
    {915, "cudaErrorInvalidResourceConfiguration", "this error indicates one or more resources are insufficient or non-applicable for the operation"},
    {999, "cudaErrorUnknown", "unknown error"},
    {10000, "cudaErrorApiFailureBase", "unhandled driver error (deprecated as of CUDA 4.1)"},
};
#define RT_NERRORS (sizeof rt_error_table / sizeof rt_error_table[0])

static const struct rt_error_text *rt_error_find(int code)
{
    /* The table is sorted by code: binary search. */
    size_t lo = 0, hi = RT_NERRORS;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rt_error_table[mid].code == code)
            return &rt_error_table[mid];
        if (rt_error_table[mid].code < code)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int rt_error_known(int e)
{
    return rt_error_find(e) != NULL;
}

const char *cudaGetErrorName(cudaError_t error)
{
    const struct rt_error_text *t = rt_error_find((int)error);
    return t ? t->name : "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t error)
{
    const struct rt_error_text *t = rt_error_find((int)error);
    return t ? t->text : "unrecognized error code";
}
