/* test_nvml.c: the emulated NVML (libnvidia-ml.so.1), reached as PyTorch
 * reaches it: dlopen of the soname and dlsym of versioned names.  What it
 * reports must be the emulated devices the driver reports (count, name,
 * UUID, PCI bus id, memory that follows cuMemAlloc), fabric info must be the
 * PCIe answer torch's expandable segments accept (success, state "not
 * supported"), and an unimplemented export answers NVML_ERROR_NOT_SUPPORTED. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <dlfcn.h>
#include <nvml.h>
#include <unistd.h>
#include "driver/exec_testutil.h"

#define EXPECT_NVML(call, want) do { nvmlReturn_t r_ = (call); \
        if (r_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d, expected %s\n", \
                                    __FILE__, __LINE__, #call, (int)r_, #want); et_failures++; } } while (0)

static void *lib;
#define NV(name) ((__typeof__(&name))nvml_sym(#name))
static void *nvml_sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "libnvidia-ml.so.1 has no %s\n", name); exit(1); }
    return p;
}

static void test_init_refcount(void)
{
    unsigned n = 99;
    EXPECT_NVML(NV(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
    EXPECT_NVML(NV(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
    EXPECT_NVML(NV(nvmlInit_v2)(), NVML_SUCCESS);
    EXPECT_NVML(NV(nvmlInitWithFlags)(0), NVML_SUCCESS);
    EXPECT_NVML(NV(nvmlShutdown)(), NVML_SUCCESS);
    EXPECT_NVML(NV(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);   /* one reference left */
    EXPECT(n == 2);
    EXPECT_NVML(NV(nvmlDeviceGetCount)(&n), NVML_SUCCESS);
    EXPECT(n == 2);
    EXPECT_NVML(NV(nvmlShutdown)(), NVML_SUCCESS);
    EXPECT_NVML(NV(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
    EXPECT(!strcmp(NV(nvmlErrorString)(NVML_ERROR_NOT_SUPPORTED), "Not Supported"));
}

static void test_identity(void)
{
    for (int d = 0; d < 2; d++) {
        nvmlDevice_t h, h2;
        EXPECT_NVML(NV(nvmlDeviceGetHandleByIndex_v2)((unsigned)d, &h), NVML_SUCCESS);
        unsigned idx = 9;
        EXPECT_NVML(NV(nvmlDeviceGetIndex)(h, &idx), NVML_SUCCESS);
        EXPECT(idx == (unsigned)d);
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], want[128];
        EXPECT_NVML(NV(nvmlDeviceGetName)(h, name, sizeof name), NVML_SUCCESS);
        OK(cuDeviceGetName(want, sizeof want, d));
        EXPECT(!strcmp(name, want));
        EXPECT_NVML(NV(nvmlDeviceGetName)(h, name, 4), NVML_ERROR_INSUFFICIENT_SIZE);
        /* UUID: the driver's bytes as "GPU-8-4-4-4-12" */
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], wantu[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        CUuuid cu;
        OK(cuDeviceGetUuid_v2(&cu, d));
        const unsigned char *b = (const unsigned char *)cu.bytes;
        snprintf(wantu, sizeof wantu, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        EXPECT_NVML(NV(nvmlDeviceGetUUID)(h, uuid, sizeof uuid), NVML_SUCCESS);
        EXPECT(!strcmp(uuid, wantu));
        EXPECT_NVML(NV(nvmlDeviceGetHandleByUUID)(uuid, &h2), NVML_SUCCESS);
        EXPECT(h2 == h);
        /* PCI bus id: the driver's, in both the 8- and 4-digit domain forms */
        char bus[64];
        OK(cuDeviceGetPCIBusId(bus, sizeof bus, d));
        EXPECT_NVML(NV(nvmlDeviceGetHandleByPciBusId_v2)(bus, &h2), NVML_SUCCESS);
        EXPECT(h2 == h);
        nvmlPciInfo_t pci;
        EXPECT_NVML(NV(nvmlDeviceGetPciInfo_v3)(h, &pci), NVML_SUCCESS);
        EXPECT(!strcasecmp(pci.busId, bus));
        EXPECT_NVML(NV(nvmlDeviceGetHandleByPciBusId_v2)(pci.busIdLegacy, &h2), NVML_SUCCESS);
        EXPECT(h2 == h);
        int bus_attr = -1;
        OK(cuDeviceGetAttribute(&bus_attr, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
        EXPECT(pci.bus == (unsigned)bus_attr && pci.domain == 0 && pci.device == 0);
        EXPECT((pci.pciDeviceId & 0xffff) == 0x10de);
        int major = 0, minor = -1;
        EXPECT_NVML(NV(nvmlDeviceGetCudaComputeCapability)(h, &major, &minor), NVML_SUCCESS);
        EXPECT(major == 9 && minor == 0);
    }
    nvmlDevice_t h;
    EXPECT_NVML(NV(nvmlDeviceGetHandleByIndex_v2)(2, &h), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_NVML(NV(nvmlDeviceGetHandleByPciBusId_v2)("00000000:07:00.0", &h), NVML_ERROR_NOT_FOUND);
    EXPECT_NVML(NV(nvmlDeviceGetHandleByUUID)("GPU-00000000-0000-0000-0000-000000000000", &h), NVML_ERROR_NOT_FOUND);
    int v = 0, want = 0;
    EXPECT_NVML(NV(nvmlSystemGetCudaDriverVersion_v2)(&v), NVML_SUCCESS);
    OK(cuDriverGetVersion(&want));
    EXPECT(v == want);
}

/* Memory follows what the emulator commits on each device; the process list
 * is this process while it holds memory there. */
static void test_memory_and_processes(void)
{
    nvmlDevice_t h0, h1;
    EXPECT_NVML(NV(nvmlDeviceGetHandleByIndex_v2)(0, &h0), NVML_SUCCESS);
    EXPECT_NVML(NV(nvmlDeviceGetHandleByIndex_v2)(1, &h1), NVML_SUCCESS);
    size_t total = 0;
    OK(cuDeviceTotalMem(&total, 1));
    nvmlMemory_t m0, before, after;
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo)(h0, &m0), NVML_SUCCESS);
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo)(h1, &before), NVML_SUCCESS);
    EXPECT(before.total == total && before.used == 0 && before.free == total);
    unsigned n = 4;
    nvmlProcessInfo_t procs[4];
    EXPECT_NVML(NV(nvmlDeviceGetComputeRunningProcesses_v3)(h1, &n, procs), NVML_SUCCESS);
    EXPECT(n == 0);

    CUcontext c1 = et_setup(1);
    (void)c1;
    CUdeviceptr p;
    REQUIRE(cuMemAlloc(&p, 64u << 20));
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo)(h1, &after), NVML_SUCCESS);
    EXPECT(after.used == before.used + (64u << 20));
    EXPECT(after.free == after.total - after.used);
    nvmlMemory_t m0b;
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo)(h0, &m0b), NVML_SUCCESS);
    EXPECT(m0b.used == m0.used);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo_v2)(h1, &m2), NVML_SUCCESS);
    EXPECT(m2.total == total && m2.used == after.used && m2.free + m2.used + m2.reserved == m2.total);
    m2.version = 1;
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo_v2)(h1, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

    n = 0;
    EXPECT_NVML(NV(nvmlDeviceGetComputeRunningProcesses_v3)(h1, &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT(n == 1);
    n = 4;
    EXPECT_NVML(NV(nvmlDeviceGetComputeRunningProcesses_v3)(h1, &n, procs), NVML_SUCCESS);
    EXPECT(n == 1 && procs[0].pid == (unsigned)getpid() && procs[0].usedGpuMemory == after.used);
    nvmlProcessInfo_v1_t old[2];
    n = 2;
    EXPECT_NVML(NV(nvmlDeviceGetComputeRunningProcesses)(h1, &n, old), NVML_SUCCESS);
    EXPECT(n == 1 && old[0].pid == (unsigned)getpid() && old[0].usedGpuMemory == after.used);
    OK(cuMemFree(p));
    EXPECT_NVML(NV(nvmlDeviceGetMemoryInfo)(h1, &after), NVML_SUCCESS);
    EXPECT(after.used == before.used);
}

static void test_fabric_and_stubs(void)
{
    nvmlDevice_t h;
    EXPECT_NVML(NV(nvmlDeviceGetHandleByIndex_v2)(0, &h), NVML_SUCCESS);
    /* torch's get_fabric_access: version 2, state preset, success required */
    nvmlGpuFabricInfoV_t f;
    memset(&f, 0xab, sizeof f);
    f.version = nvmlGpuFabricInfo_v2;
    EXPECT_NVML(NV(nvmlDeviceGetGpuFabricInfoV)(h, &f), NVML_SUCCESS);
    EXPECT(f.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED && f.version == nvmlGpuFabricInfo_v2);
    f.version = nvmlGpuFabricInfo_v3;
    EXPECT_NVML(NV(nvmlDeviceGetGpuFabricInfoV)(h, &f), NVML_SUCCESS);
    EXPECT(f.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    f.version = 7;
    EXPECT_NVML(NV(nvmlDeviceGetGpuFabricInfoV)(h, &f), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlEnableState_t on;
    EXPECT_NVML(NV(nvmlDeviceGetNvLinkState)(h, 0, &on), NVML_ERROR_NOT_SUPPORTED);
    /* P2P as the driver's cuDeviceCanAccessPeer says */
    nvmlDevice_t h1;
    EXPECT_NVML(NV(nvmlDeviceGetHandleByIndex_v2)(1, &h1), NVML_SUCCESS);
    int can = -1;
    OK(cuDeviceCanAccessPeer(&can, 0, 1));
    nvmlGpuP2PStatus_t p2p = NVML_P2P_STATUS_UNKNOWN;
    EXPECT_NVML(NV(nvmlDeviceGetP2PStatus)(h, h1, NVML_P2P_CAPS_INDEX_READ, &p2p), NVML_SUCCESS);
    EXPECT(p2p == (can ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED));
    EXPECT_NVML(NV(nvmlDeviceGetP2PStatus)(h, h1, NVML_P2P_CAPS_INDEX_UNKNOWN, &p2p), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_NVML(NV(nvmlDeviceGetP2PStatus)(h, h1, NVML_P2P_CAPS_INDEX_NVLINK, &p2p), NVML_SUCCESS);
    EXPECT(p2p == NVML_P2P_STATUS_NOT_SUPPORTED);
    /* an export the emulator does not implement: the generated stub */
    unsigned temp = 12345;
    EXPECT_NVML(NV(nvmlDeviceGetTemperatureV)(h, (nvmlTemperature_t *)&temp), NVML_ERROR_NOT_SUPPORTED);
    EXPECT(temp == 12345);
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen libnvidia-ml.so.1: %s\n", dlerror()); return 1; }
    REQUIRE(cuInit(0));
    test_init_refcount();
    EXPECT_NVML(NV(nvmlInit_v2)(), NVML_SUCCESS);
    test_identity();
    test_memory_and_processes();
    test_fabric_and_stubs();
    EXPECT_NVML(NV(nvmlShutdown)(), NVML_SUCCESS);
    return et_finish("test_nvml");
}
