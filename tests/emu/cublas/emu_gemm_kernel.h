/* emu_gemm_kernel.h: how the emulated cuBLAS and cuBLASLt enqueue a GEMM -
 * as a kernel launch (cuLaunchKernel on a function registered with the
 * emulated driver), like the real libraries, so the driver's executor
 * reports it to CUPTI as a kernel with a cuBLAS-like name ("gemm", the data
 * type and the transposes in it), its stream, device and correlation id.
 * Header-only: each library carries its own copy under its own name prefix,
 * so neither library's kernels depend on the other being loaded. */
#ifndef EMU_GEMM_KERNEL_H
#define EMU_GEMM_KERNEL_H
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "emu.h"
#include "common/driver_link.h"
#include "common/skip_modes.h"
#include "emu_gemm.h"

/* What the kernel's single parameter points at. */
struct emu_gemm_job {
    struct emu_gemm g;
    int persistent;                  /* enqueued under stream capture: may run many times */
};

/* Matrices in host-located VMM memory are read over the host link
 * (emuHostLinkCharge: counted, and timed at EMU_HOST_LINK_GBPS); the driver
 * cannot see them behind the kernel's one descriptor argument. */
static void emu_gemm_charge_mat(uint64_t (*charge)(const void *, size_t), const struct emu_mat *x,
                                int64_t rows, int64_t cols, int64_t batch)
{
    size_t es = emu_type_size(x->type);
    if (!es || rows <= 0 || cols <= 0 || (!x->ptr && !x->array)) return;
    int64_t rs = x->rs < 0 ? -x->rs : x->rs, cs = x->cs < 0 ? -x->cs : x->cs;
    size_t extent = (size_t)((rows - 1) * rs + (cols - 1) * cs + 1) * es;
    for (int64_t b = 0; b < batch; b++) {
        if (!x->array && b > 0 && x->batch_stride == 0) break;   /* one matrix for every batch */
        const char *p = x->array ? (const char *)x->array[b] : (const char *)x->ptr + b * x->batch_stride * (int64_t)es;
        if (p) charge(p, extent);
    }
}

static void emu_gemm_charge_link(const struct emu_gemm *g)
{
    uint64_t (*charge)(const void *, size_t) = EMU_DRV(emuHostLinkCharge);
    if (!charge) return;
    emu_gemm_charge_mat(charge, &g->a, g->m, g->k, g->batch);
    emu_gemm_charge_mat(charge, &g->b, g->k, g->n, g->batch);
    emu_gemm_charge_mat(charge, &g->c, g->m, g->n, g->batch);
    if (g->d.ptr != g->c.ptr || g->d.array != g->c.array) emu_gemm_charge_mat(charge, &g->d, g->m, g->n, g->batch);
}

static void emu_gemm_kernel_impl(void **args, const emu_launch *launch)
{
    (void)launch;
    struct emu_gemm_job *j = *(struct emu_gemm_job **)args[0];
    /* The operands' bytes cross the host link whether or not the product
     * is computed: a skipped GEMM on host pages still pays for them. */
    emu_gemm_charge_link(&j->g);
    /* EMU_COMPUTE=skip: validated and launched like any GEMM, not computed. */
    if (emu_compute_skipped()) EMU_DRV(emuAddCounter)("gemm.skipped", 1);
    else if (emu_gemm_run(&j->g) != 0) fprintf(stderr, "emu: cublas GEMM kernel: out of host memory, result not written\n");
    if (!j->persistent) free(j);
}

/* Kernel names by A's data type (the letter cuBLAS kernel names carry) and
 * the two transposes. */
enum { EMU_GEMM_NTYPES = 10 };
static const struct { cudaDataType t; const char *tag; } emu_gemm_type_tags[EMU_GEMM_NTYPES] = {
    {CUDA_R_32F, "s"}, {CUDA_R_64F, "d"}, {CUDA_R_16F, "h"}, {CUDA_R_16BF, "bf16"},
    {CUDA_C_32F, "c"}, {CUDA_C_64F, "z"}, {CUDA_R_8I, "i8"}, {CUDA_R_8F_E4M3, "e4m3"},
    {CUDA_R_8F_E5M2, "e5m2"}, {CUDA_R_32I, "i32"},
};

struct emu_gemm_kernels {
    const char *prefix, *suffix;     /* name = prefix TAG "gemm" suffix "_" TA TB */
    int ok;
    char names[EMU_GEMM_NTYPES + 1][3][3][80];   /* last row: any other type */
    CUfunction fn[EMU_GEMM_NTYPES + 1][3][3];
};

static void emu_gemm_kernels_register(struct emu_gemm_kernels *k)
{
    static const char op[3] = {'n', 't', 'c'};
    size_t size = sizeof(void *);
    k->ok = 1;
    for (int t = 0; t <= EMU_GEMM_NTYPES; t++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                char *name = k->names[t][a][b];
                snprintf(name, sizeof k->names[t][a][b], "%s%sgemm%s_%c%c", k->prefix,
                         t < EMU_GEMM_NTYPES ? emu_gemm_type_tags[t].tag : "x", k->suffix, op[a], op[b]);
                void *f = NULL;
                if (EMU_DRV(emuRegisterKernel)(NULL, name, emu_gemm_kernel_impl, 1, &size) != 0 ||
                    EMU_DRV(emuGetFunction)(&f, NULL, name) != CUDA_SUCCESS)
                    k->ok = 0;
                k->fn[t][a][b] = (CUfunction)f;
            }
}

/* Enqueues j on stream s as a GEMM kernel; takes ownership of j on success.
 * Registration happens once per library (pthread_once). */
static CUresult emu_gemm_launch(struct emu_gemm_kernels *k, pthread_once_t *once, void (*init)(void),
                                CUstream s, int ta, int tb, struct emu_gemm_job *j)
{
    pthread_once(once, init);
    if (!k->ok) return CUDA_ERROR_NOT_FOUND;
    int t = EMU_GEMM_NTYPES;
    for (int i = 0; i < EMU_GEMM_NTYPES; i++)
        if (emu_gemm_type_tags[i].t == j->g.a.type) t = i;
    if (ta < 0 || ta > 2) ta = 0;
    if (tb < 0 || tb > 2) tb = 0;
    /* A tile grid as a 128x64-tile kernel would have: m/128 x n/64 x batch. */
    int64_t gx = (j->g.m + 127) / 128, gy = (j->g.n + 63) / 64, gz = j->g.batch;
    unsigned ux = (unsigned)(gx < 1 ? 1 : gx > 2147483647 ? 2147483647 : gx);
    unsigned uy = (unsigned)(gy < 1 ? 1 : gy > 65535 ? 65535 : gy);
    unsigned uz = (unsigned)(gz < 1 ? 1 : gz > 65535 ? 65535 : gz);
    void *params[1] = {&j};
    return EMU_DRV(cuLaunchKernel)(k->fn[t][ta][tb], ux, uy, uz, 256, 1, 1, 0, s, params, NULL);
}
#endif
