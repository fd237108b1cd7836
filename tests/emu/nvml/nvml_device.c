/* nvml_device.c: the emulated NVML (build/emu/libnvidia-ml.so.1).
 *
 * NVML answers from the emulated driver, reached like the other emulated
 * libraries (common/driver_link.h), so what it reports is the emulated
 * device: its name, UUID, PCI bus id and memory (used = the physical device
 * bytes the emulator has committed on it, its "phys.current.<dev>" counter).
 * The devices are what EMU_DEVICES says; NVML ignores CUDA_VISIBLE_DEVICES,
 * as the real one does.  What a PCIe H100 without NVSwitch answers is
 * answered the same way here: fabric info is a success whose state is
 * NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, NvLink queries NOT_SUPPORTED.
 * Every other export is a generated stub (NVML_ERROR_NOT_SUPPORTED and one
 * "emu:" line). */
/* Legacy names (nvmlInit, nvmlDeviceGetCount...) are exports of their own. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <cuda.h>
#include <nvml.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/driver_link.h"

#define NVML_EMU_MAX_DEVICES 16
#define EMU_PCI_DEVICE_ID 0x233010deu   /* H100 SXM5 80GB (0x2330), NVIDIA (0x10de) */

struct nvmlDevice_st {
    unsigned index;
};
static struct nvmlDevice_st devices[NVML_EMU_MAX_DEVICES];

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int init_refs;                 /* nvmlInit minus nvmlShutdown */
static unsigned device_count;

static int initialized(void) { return __atomic_load_n(&init_refs, __ATOMIC_ACQUIRE) > 0; }

/* The emulated driver's count, after cuInit (NVML needs no CUDA context). */
static nvmlReturn_t probe_devices(void)
{
    int n = 0;
    if (EMU_DRV(cuInit)(0) != CUDA_SUCCESS || EMU_DRV(cuDeviceGetCount)(&n) != CUDA_SUCCESS)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    device_count = n < 0 ? 0 : n > NVML_EMU_MAX_DEVICES ? NVML_EMU_MAX_DEVICES : (unsigned)n;
    for (unsigned i = 0; i < NVML_EMU_MAX_DEVICES; i++) devices[i].index = i;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&init_mu);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (init_refs == 0) rc = probe_devices();
    if (rc == NVML_SUCCESS) __atomic_store_n(&init_refs, init_refs + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_mu);
    return rc;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&init_mu);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (init_refs == 0) rc = NVML_ERROR_UNINITIALIZED;
    else __atomic_store_n(&init_refs, init_refs - 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_mu);
    return rc;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not Ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

/* ---------------------------------------------------------------- system */
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    return EMU_DRV(cuDriverGetVersion)(cudaDriverVersion) == CUDA_SUCCESS ? NVML_SUCCESS
                                                                          : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

/* The kernel driver release that goes with CUDA 13.0. */
#define EMU_DRIVER_RELEASE "580.65.06"

static nvmlReturn_t copy_string(char *dst, unsigned len, const char *src)
{
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, EMU_DRIVER_RELEASE);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return copy_string(version, length, "13." EMU_DRIVER_RELEASE);
}

/* --------------------------------------------------------------- handles */
static nvmlReturn_t device_of(nvmlDevice_t d, unsigned *index)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (d < devices || d >= devices + device_count) return NVML_ERROR_INVALID_ARGUMENT;
    *index = d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= device_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (!pciBusId || !device) return NVML_ERROR_INVALID_ARGUMENT;
    CUdevice d;
    CUresult rc = EMU_DRV(cuDeviceGetByPCIBusId)(&d, pciBusId);
    if (rc == CUDA_ERROR_INVALID_VALUE) return NVML_ERROR_INVALID_ARGUMENT;
    if (rc != CUDA_SUCCESS || d < 0 || (unsigned)d >= device_count) return NVML_ERROR_NOT_FOUND;
    *device = &devices[d];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = i;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------ identity */
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    if (EMU_DRV(cuDeviceGetName)(buf, sizeof buf, (CUdevice)i) != CUDA_SUCCESS) return NVML_ERROR_UNKNOWN;
    return copy_string(name, length, buf);
}

static void format_uuid(char *out, size_t len, const CUuuid *u)
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(out, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static nvmlReturn_t uuid_of(unsigned i, char *out, size_t len)
{
    CUuuid u;
    if (EMU_DRV(cuDeviceGetUuid_v2)(&u, (CUdevice)i) != CUDA_SUCCESS) return NVML_ERROR_UNKNOWN;
    format_uuid(out, len, &u);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if ((rc = uuid_of(i, buf, sizeof buf)) != NVML_SUCCESS) return rc;
    return copy_string(uuid, length, buf);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < device_count; i++) {
        char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        if (uuid_of(i, buf, sizeof buf) == NVML_SUCCESS && !strcasecmp(buf, uuid)) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    char id[64];
    if (EMU_DRV(cuDeviceGetPCIBusId)(id, sizeof id, (CUdevice)i) != CUDA_SUCCESS) return NVML_ERROR_UNKNOWN;
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &dev, &func) < 3) return NVML_ERROR_UNKNOWN;
    memset(pci, 0, sizeof *pci);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = EMU_PCI_DEVICE_ID;
    pci->pciSubSystemId = 0x16c110deu;
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", domain, bus, dev, func);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain, bus, dev, func);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) { return nvmlDeviceGetPciInfo_v3(device, pci); }
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) { return nvmlDeviceGetPciInfo_v3(device, pci); }

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (EMU_DRV(cuDeviceGetAttribute)(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, (CUdevice)i) ||
        EMU_DRV(cuDeviceGetAttribute)(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, (CUdevice)i))
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

/* --------------------------------------------------------------- memory */
/* total = the device's memory; used = physical bytes the emulator has
 * committed on it (cuMemAlloc, cuMemCreate, pools: whatever backs device
 * memory), which is what a job's allocations cost on a real device. */
static nvmlReturn_t memory_of(unsigned i, unsigned long long *total, unsigned long long *used)
{
    size_t t = 0;
    if (EMU_DRV(cuDeviceTotalMem_v2)(&t, (CUdevice)i) != CUDA_SUCCESS) return NVML_ERROR_UNKNOWN;
    uint64_t (*counter)(const char *) = (uint64_t(*)(const char *))emu_driver_proc("emuGetCounter");
    char name[48];
    snprintf(name, sizeof name, "phys.current.%u", i);
    uint64_t u = counter ? counter(name) : 0;
    *total = t;
    *used = u > t ? t : u;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total, used;
    if ((rc = memory_of(i, &total, &used)) != NVML_SUCCESS) return rc;
    memory->total = total;
    memory->used = used;
    memory->free = total - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, used;
    if ((rc = memory_of(i, &total, &used)) != NVML_SUCCESS) return rc;
    memory->total = total;
    memory->reserved = 0;
    memory->used = used;
    memory->free = total - used;
    return NVML_SUCCESS;
}

/* ----------------------------------------------------------- processes */
/* The emulator's devices belong to this process: it is listed while it
 * holds device memory on the device.  Entries are v1 (pid, bytes) or v2/v3
 * (plus GPU and compute instance, "not available" outside MIG). */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned *count, void *infos, int v1)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total, used;
    if ((rc = memory_of(i, &total, &used)) != NVML_SUCCESS) return rc;
    unsigned n = used > 0 ? 1 : 0;
    unsigned room = *count;
    *count = n;
    if (n == 0) return NVML_SUCCESS;
    if (room < n || !infos) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (v1) {
        nvmlProcessInfo_v1_t *p = infos;
        p->pid = (unsigned)getpid();
        p->usedGpuMemory = used;
    } else {
        nvmlProcessInfo_t *p = infos;
        p->pid = (unsigned)getpid();
        p->usedGpuMemory = used;
        p->gpuInstanceId = 0xffffffffu;
        p->computeInstanceId = 0xffffffffu;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return running_processes(device, infoCount, infos, 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos)
{
    return running_processes(device, infoCount, infos, 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    return running_processes(device, infoCount, infos, 1);
}

/* ----------------------------------------------------- fabric, NvLink */
/* A PCIe H100 is in no NVLink fabric: the query succeeds and says so. */
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    size_t size;
    if (info->version == nvmlGpuFabricInfo_v2) size = sizeof(nvmlGpuFabricInfo_v2_t);
    else if (info->version == nvmlGpuFabricInfo_v3) size = sizeof(nvmlGpuFabricInfo_v3_t);
    else return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned version = info->version;
    memset(info, 0, size);
    info->version = version;
    info->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    info->status = NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    if (rc != NVML_SUCCESS) return rc;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    info->status = NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* No NVLink on a PCIe board: the real library's answer, not a gap. */
static nvmlReturn_t no_nvlink(nvmlDevice_t device)
{
    unsigned i;
    nvmlReturn_t rc = device_of(device, &i);
    return rc != NVML_SUCCESS ? rc : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    (void)link; (void)isActive;
    return no_nvlink(device);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    (void)link; (void)pci;
    return no_nvlink(device);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    (void)link; (void)pNvLinkDeviceType;
    return no_nvlink(device);
}

/* Peer-to-peer status follows the driver's cuDeviceCanAccessPeer for every
 * capability but NvLink, which a PCIe board does not have. */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                    nvmlGpuP2PStatus_t *p2pStatus)
{
    unsigned a, b;
    nvmlReturn_t rc = device_of(device1, &a);
    if (rc == NVML_SUCCESS) rc = device_of(device2, &b);
    if (rc != NVML_SUCCESS) return rc;
    if (!p2pStatus || (int)p2pIndex < 0 || p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN) return NVML_ERROR_INVALID_ARGUMENT;
    int can = 0;
    if (a != b && EMU_DRV(cuDeviceCanAccessPeer)(&can, (CUdevice)a, (CUdevice)b) != CUDA_SUCCESS) can = 0;
    if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK) can = 0;
    else if (a == b) can = 1;
    *p2pStatus = can ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    return NVML_SUCCESS;
}
