/* core_logs.c: the driver log API (cuLogs*), which PyTorch registers a
 * callback with at start-up.  The emulator writes no driver log (its
 * diagnostics are return codes and "emu:" lines on stderr), so the log is
 * always empty: callbacks are kept but never called, an iterator stays at 0,
 * a dump writes nothing. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *user;
    struct CUlogsCallbackEntry_st *next;
};
static pthread_mutex_t logs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUlogsCallbackEntry_st *callbacks;

CUresult cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData, CUlogsCallbackHandle *callback_out)
{
    EMU_ENTRY(cuLogsRegisterCallback);
    if (!callbackFunc) return CUDA_ERROR_INVALID_VALUE;
    struct CUlogsCallbackEntry_st *e = malloc(sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->fn = callbackFunc;
    e->user = userData;
    pthread_mutex_lock(&logs_mu);
    e->next = callbacks;
    callbacks = e;
    pthread_mutex_unlock(&logs_mu);
    if (callback_out) *callback_out = e;
    return CUDA_SUCCESS;
}

CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
    EMU_ENTRY(cuLogsUnregisterCallback);
    pthread_mutex_lock(&logs_mu);
    struct CUlogsCallbackEntry_st **p = &callbacks;
    while (*p && *p != callback) p = &(*p)->next;
    struct CUlogsCallbackEntry_st *found = *p;
    if (found) *p = found->next;
    pthread_mutex_unlock(&logs_mu);
    if (!found) return CUDA_ERROR_INVALID_VALUE;
    free(found);
    return CUDA_SUCCESS;
}

CUresult cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags)
{
    EMU_ENTRY(cuLogsCurrent);
    if (!iterator_out || flags) return CUDA_ERROR_INVALID_VALUE;
    *iterator_out = 0;
    return CUDA_SUCCESS;
}

CUresult cuLogsDumpToFile(CUlogIterator *iterator, const char *pathToFile, unsigned int flags)
{
    EMU_ENTRY(cuLogsDumpToFile);
    (void)iterator;
    if (!pathToFile || flags) return CUDA_ERROR_INVALID_VALUE;
    int fd = open(pathToFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
    close(fd);
    return CUDA_SUCCESS;
}

CUresult cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size, unsigned int flags)
{
    EMU_ENTRY(cuLogsDumpToMemory);
    (void)iterator;
    if (!buffer || !size || flags) return CUDA_ERROR_INVALID_VALUE;
    if (*size > 0) buffer[0] = '\0';
    *size = 0;
    return CUDA_SUCCESS;
}
