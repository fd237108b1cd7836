/* The copy engine cuts a converted copy as its plan says (copy_plan.c, whose
 * properties test_copy_plan checks): under the shim, one synchronous
 * cudaMemcpy of N pageable bytes reaches the driver H2D as a one-byte
 * synchronous read of the destination (the stream sync, before the source
 * is read) and one asynchronous copy per piece, D2H as one synchronous
 * piece (the stream drain) and one asynchronous copy per further piece; a
 * cudaMemcpyAsync H2D as one asynchronous copy per piece.  Counted with the emulator's per-entry-point call counters, for
 * sizes at the plan's boundaries (one byte over the first piece, one byte
 * over the largest piece, misaligned sizes, several largest pieces), and the
 * data must round-trip.  Usage: test_copy_pieces LARGEST_BYTES (the
 * TRAINSHIM_COPY_CHUNK the run uses, with TRAINSHIM_PINNED_COPY_MIN at most
 * 64 KiB so every size is converted); with no argument (or "plain") it
 * checks only the data. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../shim/copy/copy_plan.c"
#include "emu/emu.h"

#include "check.h"
#define CK(x) CHECK((x) == cudaSuccess, "%s", #x)

static unsigned long long calls(const char *entry)
{
    char name[96];
    snprintf(name, sizeof name, "calls.%s", entry);
    return emuGetCounter(name);
}

static unsigned char byte_at(size_t k, size_t i) { return (unsigned char)(k * 31 + i * 7 + (k >> 13)); }

static size_t pieces(enum ts_copy_engine_dir dir, size_t total, size_t largest)
{
    size_t n = 0;
    for (size_t done = 0; done < total; n++) done += ts_copy_plan_piece(dir, total, done, largest);
    return n;
}

int main(int argc, char **argv)
{
    int plain = argc < 2 || strcmp(argv[1], "plain") == 0;
    size_t largest = plain ? 0 : strtoull(argv[1], NULL, 10);
    const size_t K = 1024, M = 1024 * 1024;
    size_t sizes[] = {256 * K + 1, 3 * M + 12345, 8 * M, 8 * M + 1, 40 * M - 7, largest + 1, 3 * largest + 4093};
    size_t max = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] > max) max = sizes[i];
    unsigned char *src = malloc(max), *back = malloc(max);
    void *d;
    cudaStream_t s;
    if (!src || !back) return 1;
    CK(cudaMalloc(&d, max));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], want = plain ? 0 : pieces(TS_CE_H2D, n, largest),
               want_d2h = plain ? 0 : pieces(TS_CE_D2H, n, largest);
        if (n <= 1) continue;
        for (size_t k = 0; k < n; k++) src[k] = byte_at(k, i);
        unsigned long long hs = calls("cuMemcpyHtoD_v2"), ha = calls("cuMemcpyHtoDAsync_v2"),
                           hd = calls("cuMemcpyDtoH_v2");
        CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
        unsigned long long hs1 = calls("cuMemcpyHtoD_v2") - hs, ha1 = calls("cuMemcpyHtoDAsync_v2") - ha,
                           hd1 = calls("cuMemcpyDtoH_v2") - hd;
        memset(back, 0, n);
        unsigned long long ds = calls("cuMemcpyDtoH_v2"), da = calls("cuMemcpyDtoHAsync_v2");
        CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
        unsigned long long ds1 = calls("cuMemcpyDtoH_v2") - ds, da1 = calls("cuMemcpyDtoHAsync_v2") - da;
        CHECK(memcmp(src, back, n) == 0, "%zu bytes: data differs after the round trip", n);
        /* the asynchronous form: every piece an asynchronous copy */
        for (size_t k = 0; k < n; k += 4096) src[k] ^= 0x5a;
        ha = calls("cuMemcpyHtoDAsync_v2");
        CK(cudaMemcpyAsync(d, src, n, cudaMemcpyHostToDevice, s));
        unsigned long long ha2 = calls("cuMemcpyHtoDAsync_v2") - ha;
        memset(src, 0, n < 4096 ? n : 4096); /* reusable on return */
        CK(cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, s));
        size_t bad = n;
        for (size_t k = 0; k < n && bad == n; k++)
            if (back[k] != (unsigned char)(byte_at(k, i) ^ (k % 4096 ? 0 : 0x5a))) bad = k;
        CHECK(bad == n, "%zu bytes: async round trip differs at byte %zu", n, bad);
        if (!plain) {
            /* the synchronous form: the stream sync (a one-byte synchronous
             * read of the destination), then every piece asynchronous */
            CHECK(hd1 == 1 && hs1 == 0 && ha1 == want,
                  "%zu bytes H2D: %llu sync reads, %llu sync + %llu async copies, want 1, 0 + %zu", n, hd1, hs1, ha1,
                  want);
            CHECK(ds1 == 1 && da1 == want_d2h - 1, "%zu bytes D2H: %llu sync + %llu async copies, want 1 + %zu", n,
                  ds1, da1, want_d2h - 1);
            CHECK(ha2 == want, "%zu bytes async H2D: %llu async copies, want %zu", n, ha2, want);
        }
        printf("%zu bytes: %zu pieces H2D, %zu D2H\n", n, want, want_d2h);
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    free(src);
    free(back);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
