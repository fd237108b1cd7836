/* test_drv_mem_ipc: legacy CUDA IPC across a fork()ed process: the parent
 * allocates and writes, the child opens the handle and reads (and writes
 * back); VMM memory is refused; same-process opens and bad flags fail. */
#include "driver/mem_testutil.h"

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (3 << 20)

static int child(int sock)
{
    mt_setup(0);
    CUipcMemHandle h, hs;
    if (read(sock, &h, sizeof h) != (ssize_t)sizeof h) return 2;
    if (read(sock, &hs, sizeof hs) != (ssize_t)sizeof hs) return 2;
    /* a small allocation shares a page with others: only its own bytes count */
    CUdeviceptr sp = 0, sbase = 0;
    size_t ssize = 0;
    OK(cuIpcOpenMemHandle(&sp, hs, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    EXPECT(strcmp((char *)(uintptr_t)sp, "small one") == 0);
    OK(cuMemGetAddressRange(&sbase, &ssize, sp + 999));
    EXPECT(sbase == sp && ssize == 1000);
    EXPECT_RC(cuMemGetAddressRange(&sbase, &ssize, sp - 1), CUDA_ERROR_NOT_FOUND);
    EXPECT_RC(cuMemGetAddressRange(&sbase, &ssize, sp + 1000), CUDA_ERROR_NOT_FOUND);
    static char sbuf[256];
    EXPECT_RC(cuMemcpyDtoH(sbuf, sp + 900, sizeof sbuf), CUDA_ERROR_INVALID_VALUE);   /* past its end */
    OK(cuIpcCloseMemHandle(sp));
    CUdeviceptr p = 0, p2 = 0;
    EXPECT_RC(cuIpcOpenMemHandle(&p, h, 0), CUDA_ERROR_INVALID_VALUE);               /* flags must be LAZY_ENABLE_PEER_ACCESS */
    OK(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    EXPECT(emuIsDevicePointer((void *)(uintptr_t)p));
    const unsigned char *b = (const unsigned char *)(uintptr_t)p;
    size_t bad = 0;
    for (size_t i = 0; i < SIZE; i++) bad += b[i] != (unsigned char)(i * 7);
    EXPECT(bad == 0);                                                                 /* the parent's bytes */
    CUdeviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange(&base, &size, p + 100));
    EXPECT(base == p && size == SIZE);
    static char buf[4096];
    OK(cuMemcpyDtoH(buf, p + SIZE - sizeof buf, sizeof buf));                         /* copies accept the import */
    EXPECT_RC(cuMemcpyDtoH(buf, p + SIZE - 100, sizeof buf), CUDA_ERROR_INVALID_VALUE); /* but not past its end */
    unsigned type = 0;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    EXPECT(type == CU_MEMORYTYPE_DEVICE);
    OK(cuIpcOpenMemHandle(&p2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    EXPECT(p2 == p);                                                                  /* reopened: same pointer, one more reference */
    strcpy((char *)(uintptr_t)(p + 1000), "child was here");
    OK(cuIpcCloseMemHandle(p2));
    EXPECT(((char *)(uintptr_t)p)[1000] == 'c');                                     /* still mapped after the first close */
    OK(cuIpcCloseMemHandle(p));
    EXPECT_RC(cuIpcCloseMemHandle(p), CUDA_ERROR_INVALID_VALUE);                      /* fully closed */
    EXPECT_RC(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    char done = mt_failures ? 'f' : 'd';
    if (write(sock, &done, 1) != 1) return 3;
    return mt_failures ? 1 : 0;
}

int main(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) { perror("socketpair"); return 1; }
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1]));
    }
    close(sv[1]);
    mt_setup(0);
    CUdeviceptr p;
    OK(cuMemAlloc(&p, SIZE));
    unsigned char *b = (unsigned char *)(uintptr_t)p;
    for (size_t i = 0; i < SIZE; i++) b[i] = (unsigned char)(i * 7);
    CUipcMemHandle h;
    EXPECT_RC(cuIpcGetMemHandle(NULL, p), CUDA_ERROR_INVALID_VALUE);
    int local;
    EXPECT_RC(cuIpcGetMemHandle(&h, (CUdeviceptr)(uintptr_t)&local), CUDA_ERROR_INVALID_VALUE); /* host memory */
    OK(cuIpcGetMemHandle(&h, p));
    CUdeviceptr same;
    EXPECT_RC(cuIpcOpenMemHandle(&same, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT); /* own handle */
    CUipcMemHandle junk;
    memset(&junk, 0x11, sizeof junk);
    EXPECT_RC(cuIpcOpenMemHandle(&same, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);

    /* VMM memory has no legacy IPC handle */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle vh;
    CUdeviceptr r;
    OK(cuMemCreate(&vh, 2 << 20, &prop, 0));
    OK(cuMemAddressReserve(&r, 2 << 20, 0, 0, 0));
    OK(cuMemMap(r, 2 << 20, 0, vh, 0));
    CUmemAccessDesc d = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    OK(cuMemSetAccess(r, 2 << 20, &d, 1));
    CUipcMemHandle vmm_handle;
    EXPECT_RC(cuIpcGetMemHandle(&vmm_handle, r), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(r, 2 << 20));
    OK(cuMemAddressFree(r, 2 << 20));
    OK(cuMemRelease(vh));

    CUdeviceptr s1, s2;
    OK(cuMemAlloc(&s1, 1000));
    OK(cuMemAlloc(&s2, 1000));
    strcpy((char *)(uintptr_t)s2, "small one");
    CUipcMemHandle hs;
    OK(cuIpcGetMemHandle(&hs, s2));
    if (write(sv[0], &h, sizeof h) != (ssize_t)sizeof h) mt_failures++;
    if (write(sv[0], &hs, sizeof hs) != (ssize_t)sizeof hs) mt_failures++;
    char done = 0;
    EXPECT(read(sv[0], &done, 1) == 1 && done == 'd');
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(strcmp((char *)(uintptr_t)(p + 1000), "child was here") == 0);             /* shared pages */
    CUipcMemHandle h2;
    OK(cuIpcGetMemHandle(&h2, p));
    EXPECT(memcmp(&h, &h2, sizeof h) == 0);                                           /* stable for one allocation */
    OK(cuMemFree(p));
    CUdeviceptr p3;
    OK(cuMemAlloc(&p3, SIZE));
    OK(cuIpcGetMemHandle(&h2, p3));
    EXPECT(memcmp(&h, &h2, sizeof h) != 0);                                           /* unique for new memory, even at the same address */
    OK(cuMemFree(p3));
    OK(cuMemFree(s1));
    OK(cuMemFree(s2));
    return mt_finish("test_drv_mem_ipc");
}
