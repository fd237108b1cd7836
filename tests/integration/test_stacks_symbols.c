/* Allocation call stacks (TRAINSHIM_STACKS), end to end.
 *
 * The test re-executes itself as a child under LD_PRELOAD=libtrainshim.so
 * with TRAINSHIM_STACKS=16.  The child allocates through cudaMalloc from
 * distinct noinline functions with known sizes (live at the end, so they
 * are the peak), plus 100 short-lived allocations from one call site.  With
 * TS_STACKS_PLUGIN=<lib.so> (tests/integration/test_stacks_dlopen.sh) it
 * then dlopen()s that library and allocates through its plugin_alloc().
 * The parent checks:
 *   - the log holds each distinct stack once: one TS_REC_STACK per id, the
 *     100 allocations of the churn site share one id;
 *   - `trainshim report` ranks the top allocation sites by bytes and names
 *     their functions (alloc_activations, alloc_weights, alloc_workspace,
 *     then main below them), with this file's name and a line;
 *   - the JSON report's memory.top_sites carries the same frames;
 *   - with the plugin: a second module map was logged after the dlopen and
 *     the plugin's function is named. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log/logfmt.h"

#define MIB (1u << 20)

/* ---------------------------------------------------------------- child */
static void *keep[16];
static int n_keep, child_bad;
/* loop bounds the compiler cannot unroll: an unrolled loop is several call sites */
static volatile int four = 4, two = 2, hundred = 100;

__attribute__((noinline)) static void alloc_weights(void)
{
    for (int i = 0; i < four; i++)
        child_bad |= cudaMalloc(&keep[n_keep++], MIB) != cudaSuccess; /* 4 MiB */
    __asm__ volatile("" ::: "memory"); /* keeps the call a call, not a tail jump */
}

__attribute__((noinline)) static void alloc_activations(void)
{
    for (int i = 0; i < two; i++)
        child_bad |= cudaMalloc(&keep[n_keep++], 4 * MIB) != cudaSuccess; /* 8 MiB */
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void alloc_workspace(void)
{
    child_bad |= cudaMalloc(&keep[n_keep++], MIB / 4) != cudaSuccess;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void churn(void)
{
    for (int i = 0; i < hundred; i++) {
        void *p = NULL;
        child_bad |= cudaMalloc(&p, 64 << 10) != cudaSuccess;
        child_bad |= cudaFree(p) != cudaSuccess;
    }
    __asm__ volatile("" ::: "memory");
}

static int child(void)
{
    child_bad |= cudaSetDevice(0) != cudaSuccess;
    alloc_weights();
    churn();
    alloc_activations();
    alloc_workspace();
    /* copies for the exports (tests/integration/test_export_formats.sh):
     * a synchronous one from pageable memory and an asynchronous one on a
     * stream of its own */
    static unsigned char host[1 << 20];
    cudaStream_t s = NULL;
    child_bad |= cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
    child_bad |= cudaMemcpy(keep[0], host, sizeof host, cudaMemcpyHostToDevice) != cudaSuccess;
    child_bad |= cudaMemcpyAsync(keep[1], keep[0], sizeof host, cudaMemcpyDeviceToDevice, s) != cudaSuccess;
    child_bad |= cudaStreamSynchronize(s) != cudaSuccess;
    child_bad |= cudaStreamDestroy(s) != cudaSuccess;
    const char *plugin = getenv("TS_STACKS_PLUGIN");
    if (plugin && plugin[0]) {
        void *h = dlopen(plugin, RTLD_NOW);
        if (!h) {
            fprintf(stderr, "dlopen %s: %s\n", plugin, dlerror());
            return 1;
        }
        int (*plugin_alloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(h, "plugin_alloc");
        if (!plugin_alloc)
            return 1;
        /* 16 MiB: the largest site at the peak */
        child_bad |= plugin_alloc(&keep[n_keep++], 16 * MIB) != 0;
    }
    if (child_bad)
        fprintf(stderr, "child: a CUDA call failed\n");
    return child_bad;
}

/* ---------------------------------------------------------------- parent */
static int failures;
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)sz + 1);
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
        free(p);
        p = NULL;
    }
    if (p)
        p[sz] = 0;
    fclose(f);
    *n = (size_t)sz;
    return p;
}

/* Counts of the stack records, by walking the record framing. */
struct counts {
    int stacks, modules, alloc_stacks, dup_ids, unknown_refs;
    uint32_t ids[4096];
    int churn_id_allocs; /* allocations of the most used stack id */
};

static void count_records(const char *log, struct counts *c)
{
    size_t n = 0;
    unsigned char *p = (unsigned char *)slurp(log, &n);
    memset(c, 0, sizeof *c);
    if (!p || n < sizeof(struct ts_log_preamble)) {
        free(p);
        return;
    }
    static uint32_t ref_count[1 << 16];
    memset(ref_count, 0, sizeof ref_count);
    size_t off = sizeof(struct ts_log_preamble);
    while (off + sizeof(struct ts_rec_hdr) <= n) {
        struct ts_rec_hdr h;
        memcpy(&h, p + off, sizeof h);
        if (h.len < sizeof h || h.len > n - off || ts_rec_check(p + off, h.len) != h.check)
            break;
        if (h.type == TS_REC_STACK) {
            struct ts_rec_stack s;
            memcpy(&s, p + off, sizeof s);
            for (int i = 0; i < c->stacks && i < 4096; i++)
                if (c->ids[i] == s.stack_id)
                    c->dup_ids++;
            if (c->stacks < 4096)
                c->ids[c->stacks] = s.stack_id;
            c->stacks++;
        } else if (h.type == TS_REC_MODULES) {
            c->modules++;
        } else if (h.type == TS_REC_ALLOC_STACK) {
            struct ts_rec_alloc_stack a;
            memcpy(&a, p + off, sizeof a);
            c->alloc_stacks++;
            ref_count[a.stack_id & 0xffff]++;
        }
        off += h.len;
    }
    for (uint32_t id = 0; id < (1u << 16); id++) {
        if (!ref_count[id])
            continue;
        int known = 0;
        for (int i = 0; i < c->stacks && i < 4096; i++)
            known |= c->ids[i] == id;
        if (!known)
            c->unknown_refs++;
        if ((int)ref_count[id] > c->churn_id_allocs)
            c->churn_id_allocs = (int)ref_count[id];
    }
    free(p);
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* The frame lines of site #k in the text report (NULL-terminated copy). */
static char *site_block(const char *report, int k)
{
    const char *sec = strstr(report, "== TOP ALLOCATION SITES");
    if (!sec)
        return NULL;
    char tag[8];
    snprintf(tag, sizeof tag, "\n#%-2d", k);
    const char *s = strstr(sec, tag);
    if (!s)
        return NULL;
    s++;
    const char *e = strstr(s + 1, "\n#");
    const char *e2 = strstr(s + 1, "\n\n");
    if (!e || (e2 && e2 < e))
        e = e2;
    size_t len = e ? (size_t)(e - s) : strlen(s);
    return strndup(s, len);
}

/* The first frame line (after the size line) of a site block starts with fn. */
static int first_frame_is(const char *block, const char *fn)
{
    const char *nl = block ? strchr(block, '\n') : NULL;
    if (!nl)
        return 0;
    nl++;
    while (*nl == ' ')
        nl++;
    return !strncmp(nl, fn, strlen(fn)) && nl[strlen(fn)] == ' ';
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("TS_STACKS_CHILD"))
        return child();
    const char *b = getenv("B") ? getenv("B") : "build";
    const char *plugin = getenv("TS_STACKS_PLUGIN");
    char shim[512], tool[512], dir[] = "/tmp/ts_stacks_XXXXXX", logpath[600], cmd[2048];
    if (b[0] == '/')
        snprintf(shim, sizeof shim, "%s/libtrainshim.so", b);
    else
        snprintf(shim, sizeof shim, "%s/%s/libtrainshim.so", getcwd(cmd, sizeof cmd), b);
    snprintf(tool, sizeof tool, "%s/trainshim", b);
    if (access(shim, R_OK) || access(tool, X_OK)) {
        printf("FAIL: %s or %s not built\n", shim, tool);
        return 1;
    }
    if (!mkdtemp(dir))
        return 1;
    snprintf(logpath, sizeof logpath, "%s/run.log", dir);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv("TRAINSHIM_LOG", logpath, 1);
        setenv("TRAINSHIM_STACKS", "16", 1);
        setenv("TS_STACKS_CHILD", "1", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child under the shim failed (status %d)", st);

    struct counts c;
    count_records(logpath, &c);
    int plugin_sites = plugin && plugin[0] ? 1 : 0;
    /* each distinct stack once; the churn site's 100 allocations share one */
    CHECK(c.dup_ids == 0, "%d stack ids logged twice", c.dup_ids);
    CHECK(c.alloc_stacks == 107 + plugin_sites, "alloc stack records: %d, want %d", c.alloc_stacks,
          107 + plugin_sites);
    CHECK(c.churn_id_allocs == 100, "most used stack has %d allocations, want 100", c.churn_id_allocs);
    CHECK(c.stacks >= 4 + plugin_sites && c.stacks <= 4 + plugin_sites + 2,
          "%d distinct stacks logged for %d call sites", c.stacks, 4 + plugin_sites);
    CHECK(c.unknown_refs == 0, "%d stack ids referenced but never logged", c.unknown_refs);
    CHECK(c.modules >= 1 + plugin_sites, "%d module maps logged, want >= %d", c.modules, 1 + plugin_sites);

    /* the text report names the functions, largest site first */
    char out[700];
    snprintf(out, sizeof out, "%s/report.txt", dir);
    snprintf(cmd, sizeof cmd, "%s report %s > %s", tool, logpath, out);
    CHECK(run(cmd) == 0, "%s failed", cmd);
    size_t n = 0;
    char *report = slurp(out, &n);
    CHECK(report && strstr(report, "== TOP ALLOCATION SITES"), "no TOP ALLOCATION SITES section");
    CHECK(report && strstr(report, "== MEMORY TIMELINE"), "no MEMORY TIMELINE section");
    const char *order[] = {"plugin_alloc", "alloc_activations", "alloc_weights", "alloc_workspace"};
    const char *bytes[] = {"16.00 MiB", "8.00 MiB", "4.00 MiB", "256.00 KiB"};
    for (int i = plugin_sites ? 0 : 1, k = 1; i < 4 && report; i++, k++) {
        char *blk = site_block(report, k);
        CHECK(blk && first_frame_is(blk, order[i]), "site #%d does not start at %s:\n%s", k, order[i],
              blk ? blk : "(missing)");
        CHECK(blk && strstr(blk, bytes[i]), "site #%d is not %s:\n%s", k, bytes[i], blk ? blk : "(missing)");
        if (i > 0) {
            CHECK(blk && strstr(blk, "test_stacks_symbols.c:"), "site #%d has no file:line:\n%s", k,
                  blk ? blk : "");
            CHECK(blk && strstr(blk, "\n      main (") , "site #%d does not reach main:\n%s", k, blk ? blk : "");
        }
        free(blk);
    }
    /* the churn site was freed before the peak: not a top site */
    CHECK(report && !strstr(report, "      churn ("), "freed churn allocations listed at the peak");
    if (failures && report)
        printf("report:\n%s\n", report);
    free(report);

    /* the JSON report carries the same frames */
    snprintf(cmd, sizeof cmd,
             "%s report --format json %s | python3 -c '\n"
             "import json, sys\n"
             "r = json.load(sys.stdin)\n"
             "sites = r[\"memory\"][\"top_sites\"]\n"
             "want = %s\n"
             "got = [s[\"frames\"][0][\"function\"] for s in sites[:len(want)]]\n"
             "assert got == want, got\n"
             "for s in sites[:len(want)]:\n"
             "    assert s[\"count\"] >= 1 and s[\"bytes\"] > 0, s\n"
             "    assert any(f[\"function\"] == \"main\" for f in s[\"frames\"]) or s[\"frames\"][0][\"function\"] == \"plugin_alloc\", s\n"
             "'",
             tool, logpath,
             plugin_sites ? "[\"plugin_alloc\", \"alloc_activations\", \"alloc_weights\", \"alloc_workspace\"]"
                          : "[\"alloc_activations\", \"alloc_weights\", \"alloc_workspace\"]");
    CHECK(run(cmd) == 0, "JSON memory.top_sites check failed");

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (!failures)
        run(cmd);
    else
        printf("log kept in %s\n", dir);
    if (!failures)
        printf("ok: %d stacks, %d module maps, %d allocation stacks; sites named\n", c.stacks, c.modules,
               c.alloc_stacks);
    return failures != 0;
}
