/* test_drv_mem_vmm: every rule of the emulated VMM API (cuMemAddressReserve,
 * cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease,
 * cuMemRetainAllocationHandle, export/import as POSIX fds, also across a
 * fork()ed process), one rule per check. */
#include "driver/mem_testutil.h"

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define G (2ULL << 20)

static CUmemAllocationProp dev_prop(int ordinal, unsigned handle_types)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = ordinal;
    p.requestedHandleTypes = (CUmemAllocationHandleType)handle_types;
    return p;
}

static CUmemAccessDesc rw_desc(int ordinal)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = ordinal;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    OK(cuMemGetInfo(&f, &t));
    return f;
}

static void test_granularity(void)
{
    CUmemAllocationProp p = dev_prop(0, 0);
    size_t g = 0;
    OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EXPECT(g == G);
    OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    EXPECT(g == G);
    EXPECT_RC(cuMemGetAllocationGranularity(&g, &p, (CUmemAllocationGranularity_flags)7), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemGetAllocationGranularity(&g, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
    p.location.id = 99;
    EXPECT_RC(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_DEVICE);
}

static void test_reserve(void)
{
    CUdeviceptr a, b;
    /* cuda.h: size and addr must be multiples of the host page size (not of
     * the granularity: only mappings need that). */
    EXPECT_RC(cuMemAddressReserve(&a, G + 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);   /* not a page multiple */
    EXPECT_RC(cuMemAddressReserve(&a, G, 0, 4096 + 100, 0), CUDA_ERROR_INVALID_VALUE); /* hint not page-aligned */
    OK(cuMemAddressReserve(&a, G + 4096, 0, 0, 0));
    EXPECT(a % G == 0);
    {
        CUmemAllocationProp hp = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                  .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
        CUmemGenericAllocationHandle h2;
        OK(cuMemCreate(&h2, 2 * G, &hp, 0));
        EXPECT_RC(cuMemMap(a, 2 * G, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);            /* past the reservation */
        OK(cuMemMap(a, G, 0, h2, 0));                                                 /* the whole granules fit */
        OK(cuMemUnmap(a, G));
        OK(cuMemRelease(h2));
    }
    EXPECT_RC(cuMemAddressFree(a, G), CUDA_ERROR_INVALID_VALUE);                      /* exactly the reserved size */
    OK(cuMemAddressFree(a, G + 4096));
    EXPECT_RC(cuMemAddressReserve(&a, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemAddressReserve(&a, G, 3 * G, 0, 0), CUDA_ERROR_INVALID_VALUE);     /* alignment not a power of two */
    EXPECT_RC(cuMemAddressReserve(&a, G, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);         /* flags must be 0 */
    OK(cuMemAddressReserve(&a, 32 * G, 0, 0, 0));
    EXPECT(a % G == 0 && emuIsDevicePointer((void *)(uintptr_t)a));
    OK(cuMemAddressReserve(&b, 4 * G, 1ULL << 30, 0, 0));
    EXPECT(b % (1ULL << 30) == 0);
    EXPECT(b + 4 * G <= a || a + 32 * G <= b);                                       /* disjoint */
    EXPECT_RC(cuMemAddressFree(a, 16 * G), CUDA_ERROR_INVALID_VALUE);                 /* wrong size */
    EXPECT_RC(cuMemAddressFree(a + G, 31 * G), CUDA_ERROR_INVALID_VALUE);             /* not the reserved start */
    OK(cuMemAddressFree(a, 32 * G));
    EXPECT_RC(cuMemAddressFree(a, 32 * G), CUDA_ERROR_INVALID_VALUE);                 /* already freed */
    CUdeviceptr c;
    OK(cuMemAddressReserve(&c, 8 * G, 0, a + 4 * G, 0));                             /* a free hint is honoured */
    EXPECT(c == a + 4 * G);
    CUdeviceptr d;
    OK(cuMemAddressReserve(&d, 8 * G, 0, c, 0));                                     /* a taken hint is only a hint */
    EXPECT(d != c && (d + 8 * G <= c || c + 8 * G <= d));
    OK(cuMemAddressFree(b, 4 * G));
    OK(cuMemAddressFree(c, 8 * G));
    OK(cuMemAddressFree(d, 8 * G));
}

static void test_create_rules(void)
{
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp p = dev_prop(0, 0);
    EXPECT_RC(cuMemCreate(&h, G + 1, &p, 0), CUDA_ERROR_INVALID_VALUE);               /* size not a granularity multiple */
    EXPECT_RC(cuMemCreate(&h, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemCreate(&h, G, &p, 1), CUDA_ERROR_INVALID_VALUE);                   /* flags must be 0 */
    EXPECT_RC(cuMemCreate(&h, G, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp bad = p;
    bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    EXPECT_RC(cuMemCreate(&h, G, &bad, 0), CUDA_ERROR_INVALID_VALUE);                 /* type must be PINNED */
    bad = p;
    bad.location.id = 42;
    EXPECT_RC(cuMemCreate(&h, G, &bad, 0), CUDA_ERROR_INVALID_DEVICE);                /* valid ordinal */
    size_t total, f0 = free_mem();
    OK(cuMemGetInfo(&f0, &total));
    EXPECT_RC(cuMemCreate(&h, (total + G) / G * G, &p, 0), CUDA_ERROR_OUT_OF_MEMORY); /* beyond capacity */
    OK(cuMemCreate(&h, 8 * G, &p, 0));
    EXPECT(f0 - free_mem() == 8 * G);                                                 /* capacity accounted */
    CUmemAllocationProp got;
    OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    EXPECT(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           got.location.id == 0);
    OK(cuMemRelease(h));
    EXPECT(free_mem() == f0);                                                         /* unmapped + released = freed */
    EXPECT_RC(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);                             /* stale handle */
    EXPECT_RC(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_ERROR_INVALID_VALUE);
}

static void test_map_rules(void)
{
    CUmemAllocationProp p = dev_prop(0, 0);
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr r;
    OK(cuMemCreate(&h, 4 * G, &p, 0));
    OK(cuMemCreate(&h2, 2 * G, &p, 0));
    OK(cuMemAddressReserve(&r, 16 * G, 0, 0, 0));
    EXPECT_RC(cuMemMap(r + 4096, 4 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);          /* unaligned address */
    EXPECT_RC(cuMemMap(r, 4 * G - 4096, 0, h, 0), CUDA_ERROR_INVALID_VALUE);          /* unaligned size */
    EXPECT_RC(cuMemMap(r, 2 * G, G, h, 0), CUDA_ERROR_INVALID_VALUE);                 /* offset must be zero */
    EXPECT_RC(cuMemMap(r, 2 * G, 4096, h, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemMap(r, 8 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);                 /* larger than the handle */
    EXPECT_RC(cuMemMap(r, 4 * G, 0, h, 1), CUDA_ERROR_INVALID_VALUE);                 /* flags must be 0 */
    EXPECT_RC(cuMemMap(r, 4 * G, 0, (CUmemGenericAllocationHandle)0x12345, 0), CUDA_ERROR_INVALID_VALUE); /* bad handle */
    EXPECT_RC(cuMemMap(r + 14 * G, 4 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);        /* runs past the reservation */
    CUdeviceptr arena;
    OK(cuMemAlloc(&arena, 4 * G));
    EXPECT_RC(cuMemMap((arena + G - 1) / G * G, 2 * G, 0, h2, 0), CUDA_ERROR_INVALID_VALUE); /* outside any reservation */
    OK(cuMemFree(arena));
    OK(cuMemMap(r, 4 * G, 0, h, 0));
    EXPECT_RC(cuMemMap(r + 2 * G, 2 * G, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);        /* over a mapped range */
    EXPECT_RC(cuMemMap(r, 2 * G, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemMap(r + 4 * G, 2 * G, 0, h2, 0));                                         /* adjacent is fine */

    /* access: none until cuMemSetAccess, over whole mappings only */
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    unsigned long long flags = 99;
    OK(cuMemGetAccess(&flags, &loc, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CUmemAccessDesc d = rw_desc(0);
    EXPECT_RC(cuMemSetAccess(r, 2 * G, &d, 1), CUDA_ERROR_INVALID_VALUE);             /* sub-range of a mapping */
    EXPECT_RC(cuMemSetAccess(r, 8 * G, &d, 1), CUDA_ERROR_INVALID_VALUE);             /* runs into unmapped space */
    EXPECT_RC(cuMemSetAccess(r + 6 * G, 2 * G, &d, 1), CUDA_ERROR_INVALID_VALUE);     /* nothing mapped */
    CUmemAccessDesc badd = rw_desc(7);
    EXPECT_RC(cuMemSetAccess(r, 4 * G, &badd, 1), CUDA_ERROR_INVALID_DEVICE);
    badd = rw_desc(0);
    badd.flags = (CUmemAccess_flags)2;
    EXPECT_RC(cuMemSetAccess(r, 4 * G, &badd, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemSetAccess(r, 6 * G, &d, 1));                                              /* two whole mappings */
    OK(cuMemGetAccess(&flags, &loc, r + 5 * G));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    EXPECT_RC(cuMemGetAccess(&flags, &loc, r + 7 * G), CUDA_ERROR_INVALID_VALUE);     /* not mapped */
    memset((void *)(uintptr_t)r, 0x5a, 6 * G);                                        /* now accessible */

    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, r + 5 * G + 17));                           /* the mapping holding it */
    EXPECT(base == r + 4 * G && size == 2 * G);
    EXPECT_RC(cuMemAddressFree(r, 16 * G), CUDA_ERROR_INVALID_VALUE);                 /* still mapped */

    /* unmap: whole mappings only */
    EXPECT_RC(cuMemUnmap(r, 2 * G), CUDA_ERROR_INVALID_VALUE);                        /* partial */
    EXPECT_RC(cuMemUnmap(r + 2 * G, 2 * G), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemUnmap(r, 8 * G), CUDA_ERROR_INVALID_VALUE);                        /* beyond the mappings */
    OK(cuMemUnmap(r, 6 * G));                                                         /* two whole mappings at once */
    EXPECT_RC(cuMemGetAddressRange(&base, &size, r), CUDA_ERROR_NOT_FOUND);
    OK(cuMemMap(r, 4 * G, 0, h, 0));                                                  /* reusable reservation */
    OK(cuMemGetAccess(&flags, &loc, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_NONE);                                   /* a new mapping starts without access */
    OK(cuMemUnmap(r, 4 * G));
    OK(cuMemAddressFree(r, 16 * G));
    OK(cuMemRelease(h));
    OK(cuMemRelease(h2));
}

static void test_release_while_mapped(void)
{
    size_t f0 = free_mem();
    CUmemAllocationProp p = dev_prop(0, 0);
    CUmemGenericAllocationHandle h, again, again2;
    CUdeviceptr r;
    OK(cuMemCreate(&h, 2 * G, &p, 0));
    OK(cuMemAddressReserve(&r, 2 * G, 0, 0, 0));
    OK(cuMemMap(r, 2 * G, 0, h, 0));
    CUmemAccessDesc d = rw_desc(0);
    OK(cuMemSetAccess(r, 2 * G, &d, 1));
    memset((void *)(uintptr_t)r, 0x77, 2 * G);
    OK(cuMemRelease(h));                                                              /* legal while mapped */
    EXPECT(f0 - free_mem() == 2 * G);                                                 /* memory kept */
    EXPECT(((unsigned char *)(uintptr_t)r)[G + 5] == 0x77);
    EXPECT_RC(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);                             /* no reference left */
    EXPECT_RC(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(r + 4 * G)), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(r + G + 3)));          /* any mapped address */
    EXPECT(again == h);                                                               /* the same handle value */
    OK(cuMemRetainAllocationHandle(&again2, (void *)(uintptr_t)r));
    OK(cuMemRelease(again));
    OK(cuMemRelease(again2));
    EXPECT(f0 - free_mem() == 2 * G);
    OK(cuMemUnmap(r, 2 * G));                                                         /* last mapping gone */
    EXPECT(free_mem() == f0);
    OK(cuMemAddressFree(r, 2 * G));
}

static void test_refcounts(void)
{
    size_t f0 = free_mem();
    CUmemAllocationProp p = dev_prop(0, 0);
    CUmemGenericAllocationHandle h, r1, r2;
    CUdeviceptr r;
    OK(cuMemCreate(&h, 2 * G, &p, 0));
    OK(cuMemAddressReserve(&r, 2 * G, 0, 0, 0));
    OK(cuMemMap(r, 2 * G, 0, h, 0));
    OK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)r));
    OK(cuMemRetainAllocationHandle(&r2, (void *)(uintptr_t)r));
    OK(cuMemUnmap(r, 2 * G));
    OK(cuMemRelease(h));
    OK(cuMemRelease(r1));
    EXPECT(f0 - free_mem() == 2 * G);                                                 /* one reference left */
    OK(cuMemGetAllocationPropertiesFromHandle(&p, r2));
    OK(cuMemRelease(r2));
    EXPECT(free_mem() == f0);                                                         /* last reference released */
    EXPECT_RC(cuMemRelease(r2), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(r, 2 * G));
}

static void test_aliasing_and_export(void)
{
    CUmemAllocationProp p = dev_prop(0, 0);
    CUmemGenericAllocationHandle h, hfd, himp;
    CUdeviceptr a, b, c;
    OK(cuMemCreate(&h, 2 * G, &p, 0));
    OK(cuMemAddressReserve(&a, 2 * G, 0, 0, 0));
    OK(cuMemAddressReserve(&b, 2 * G, 0, 0, 0));
    OK(cuMemMap(a, 2 * G, 0, h, 0));
    OK(cuMemMap(b, 2 * G, 0, h, 0));                                                  /* one handle, two mappings */
    CUmemAccessDesc d = rw_desc(0);
    OK(cuMemSetAccess(a, 2 * G, &d, 1));
    OK(cuMemSetAccess(b, 2 * G, &d, 1));
    strcpy((char *)(uintptr_t)(a + 1000), "same bytes");
    EXPECT(strcmp((char *)(uintptr_t)(b + 1000), "same bytes") == 0);                 /* aliasing */
    int fd = -1;
    EXPECT_RC(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);                                              /* created without that type */
    OK(cuMemUnmap(a, 2 * G));
    OK(cuMemUnmap(b, 2 * G));
    OK(cuMemRelease(h));

    p = dev_prop(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    OK(cuMemCreate(&hfd, 2 * G, &p, 0));
    EXPECT_RC(cuMemExportToShareableHandle(&fd, hfd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemExportToShareableHandle(&fd, hfd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    EXPECT(fd >= 0);
    size_t f0 = free_mem();
    OK(cuMemImportFromShareableHandle(&himp, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    EXPECT(free_mem() == f0);                                                         /* an import is no new memory */
    close(fd);                                                                        /* the import holds its own */
    int notours = dup(1);
    CUmemGenericAllocationHandle hbad;
    EXPECT_RC(cuMemImportFromShareableHandle(&hbad, (void *)(uintptr_t)notours, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_INVALID_VALUE);
    close(notours);
    OK(cuMemMap(a, 2 * G, 0, hfd, 0));
    OK(cuMemMap(c = b, 2 * G, 0, himp, 0));
    OK(cuMemSetAccess(a, 2 * G, &d, 1));
    OK(cuMemSetAccess(c, 2 * G, &d, 1));
    strcpy((char *)(uintptr_t)(a + 77), "through the fd");
    EXPECT(strcmp((char *)(uintptr_t)(c + 77), "through the fd") == 0);
    OK(cuMemUnmap(a, 2 * G));
    OK(cuMemUnmap(c, 2 * G));
    OK(cuMemRelease(hfd));
    OK(cuMemRelease(himp));
    OK(cuMemAddressFree(a, 2 * G));
    OK(cuMemAddressFree(b, 2 * G));
}

/* ---- across processes: the child imports an fd received by SCM_RIGHTS ---- */

static void send_fd(int sock, int fd)
{
    char byte = 'f';
    struct iovec iov = { &byte, 1 };
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    if (sendmsg(sock, &msg, 0) != 1) perror("sendmsg");
}

static int recv_fd(int sock)
{
    char byte;
    struct iovec iov = { &byte, 1 };
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    if (recvmsg(sock, &msg, 0) != 1) return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    int fd = -1;
    if (cm && cm->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    return fd;
}

static int child_import(int sock)
{
    mt_setup(0);
    int fd = recv_fd(sock);
    EXPECT(fd >= 0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    OK(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUmemAllocationProp p;
    OK(cuMemGetAllocationPropertiesFromHandle(&p, h));
    EXPECT(p.location.id == 0 && (p.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    OK(cuMemAddressReserve(&r, 2 * G, 0, 0, 0));
    OK(cuMemMap(r, 2 * G, 0, h, 0));
    CUmemAccessDesc d = rw_desc(0);
    OK(cuMemSetAccess(r, 2 * G, &d, 1));
    EXPECT(strcmp((char *)(uintptr_t)(r + G), "from the parent") == 0);
    strcpy((char *)(uintptr_t)(r + 64), "from the child");
    OK(cuMemUnmap(r, 2 * G));
    OK(cuMemRelease(h));
    close(fd);
    char done = 'd';
    if (write(sock, &done, 1) != 1) mt_failures++;
    return mt_failures ? 1 : 0;
}

static void test_cross_process(int sock, pid_t child)
{
    CUmemAllocationProp p = dev_prop(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    OK(cuMemCreate(&h, 2 * G, &p, 0));
    OK(cuMemAddressReserve(&r, 2 * G, 0, 0, 0));
    OK(cuMemMap(r, 2 * G, 0, h, 0));
    CUmemAccessDesc d = rw_desc(0);
    OK(cuMemSetAccess(r, 2 * G, &d, 1));
    strcpy((char *)(uintptr_t)(r + G), "from the parent");
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    send_fd(sock, fd);
    close(fd);
    char done = 0;
    EXPECT(read(sock, &done, 1) == 1 && done == 'd');
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(strcmp((char *)(uintptr_t)(r + 64), "from the child") == 0);               /* same physical pages */
    OK(cuMemUnmap(r, 2 * G));
    OK(cuMemAddressFree(r, 2 * G));
    OK(cuMemRelease(h));
}

int main(void)
{
    /* The child is forked before either process initializes CUDA, as a real
     * multi-process job does. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) { perror("socketpair"); return 1; }
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        _exit(child_import(sv[1]));
    }
    close(sv[1]);
    mt_setup(0);
    test_granularity();
    test_reserve();
    test_create_rules();
    test_map_rules();
    test_release_while_mapped();
    test_refcounts();
    test_aliasing_and_export();
    test_cross_process(sv[0], child);
    return mt_finish("test_drv_mem_vmm");
}
