/* gen_log.h: the log-building core of the synthetic log generators
 * (tests/golden/gen_*.c, tests/bench/gen_big_log.c): one log held in
 * memory, records appended zeroed with their header filled in, the preamble
 * and the HEADER / API_NAMES / DEVICE records a log opens with, the END
 * record, the checksums and the file write.  Each generator is one
 * translation unit that its test script compiles on its own (-Ishim), so
 * everything here is static and needs no Makefile rule. */
#ifndef TRAINSHIM_TESTS_GEN_LOG_H
#define TRAINSHIM_TESTS_GEN_LOG_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log/logfmt.h"

#define GEN_START_NS 1000000000000ull                          /* the run's monotonic start */
#define GEN_START_REALTIME_NS (1767225600ull * 1000000000ull) /* 2026-01-01T00:00:00Z */

static unsigned char gen_buf[1 << 20];
static size_t gen_used;

/* Appends a zeroed record of size bytes (a multiple of the record
 * alignment) by thread tid, ns after the run's start. */
static inline void *gen_rec(uint16_t type, uint32_t size, uint32_t tid, uint64_t ns)
{
    struct ts_rec_hdr *h = (struct ts_rec_hdr *)(gen_buf + gen_used);
    memset(h, 0, size);
    h->len = size;
    h->type = type;
    h->tid = tid;
    h->time_ns = GEN_START_NS + ns;
    gen_used += size;
    return h;
}

/* What a log's HEADER and API_NAMES records say.  cmdline holds the
 * arguments NUL-separated (cmdline_len bytes, no final NUL); apis NULL: the
 * log has no API_NAMES record. */
struct gen_log_run {
    uint32_t tid;
    int pid, rank, local_rank, world_size;
    const char *host;
    const char *cmdline;
    size_t cmdline_len;
    const char *config;
    const char *const *apis;
    int n_apis;
};

/* Starts a new log: the preamble, the HEADER record and the API_NAMES
 * record, both at the run's start. */
static inline void gen_begin(const struct gen_log_run *run)
{
    struct ts_log_preamble *p = (struct ts_log_preamble *)gen_buf;
    memset(p, 0, sizeof *p);
    memcpy(p->magic, TS_LOG_MAGIC, 8);
    p->version_major = TS_LOG_VERSION_MAJOR;
    p->version_minor = TS_LOG_VERSION_MINOR;
    p->byte_order = TS_LOG_BYTE_ORDER;
    gen_used = sizeof *p;

    size_t hl = strlen(run->host), cl = run->cmdline_len, fl = strlen(run->config);
    uint32_t len = ts_rec_align((uint32_t)(sizeof(struct ts_rec_header) + hl + cl + fl));
    struct ts_rec_header *h = gen_rec(TS_REC_HEADER, len, run->tid, 0);
    h->pid = run->pid, h->rank = run->rank, h->local_rank = run->local_rank, h->world_size = run->world_size;
    h->start_realtime_ns = GEN_START_REALTIME_NS, h->start_mono_ns = GEN_START_NS;
    h->host_len = (uint32_t)hl, h->cmdline_len = (uint32_t)cl, h->config_len = (uint32_t)fl;
    char *s = (char *)(h + 1);
    memcpy(s, run->host, hl);
    memcpy(s + hl, run->cmdline, cl);
    memcpy(s + hl + cl, run->config, fl);

    if (!run->apis)
        return;
    size_t nl = 0;
    for (int i = 0; i < run->n_apis; i++)
        nl += strlen(run->apis[i]) + 1;
    struct ts_rec_api_names *a = gen_rec(TS_REC_API_NAMES, ts_rec_align((uint32_t)(sizeof *a + nl)), run->tid, 0);
    a->count = (uint32_t)run->n_apis;
    char *n = (char *)(a + 1);
    for (int i = 0; i < run->n_apis; i++)
        n = stpcpy(n, run->apis[i]) + 1;
}

/* What a DEVICE record says; pci_bus_id NULL: none. */
struct gen_log_device {
    int ordinal;
    const char *name;
    uint64_t total_mem;
    int cc_major, cc_minor, sm_count;
    const char *pci_bus_id;
};

static inline void gen_device(uint32_t tid, uint64_t ns, const struct gen_log_device *dev)
{
    struct ts_rec_device *d = gen_rec(TS_REC_DEVICE, sizeof *d, tid, ns);
    d->ordinal = dev->ordinal;
    snprintf(d->name, sizeof d->name, "%s", dev->name);
    d->total_mem = dev->total_mem;
    d->cc_major = dev->cc_major;
    d->cc_minor = dev->cc_minor;
    d->sm_count = dev->sm_count;
    if (dev->pci_bus_id)
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", dev->pci_bus_id);
}

/* The run of the advice generators' logs: `python train.py` as pid 4000 on
 * node-a, not distributed, on one 80 GiB H100 (its DEVICE record 1 ns in),
 * every record by thread tid. */
static inline void gen_begin_h100_run(uint32_t tid, const char *config, const char *const *apis, int n_apis)
{
    static const char cmd[] = "python\0train.py";
    gen_begin(&(struct gen_log_run){ .tid = tid, .pid = 4000, .rank = -1, .local_rank = -1, .world_size = -1,
                                     .host = "node-a", .cmdline = cmd, .cmdline_len = sizeof cmd - 1,
                                     .config = config, .apis = apis, .n_apis = n_apis });
    gen_device(tid, 1, &(struct gen_log_device){ .name = "NVIDIA H100 80GB HBM3", .total_mem = 80ull << 30,
                                                 .cc_major = 9, .sm_count = 132 });
}

/* The latest record time so far, in ns after the run's start. */
static inline uint64_t gen_last_ns(void)
{
    uint64_t last = GEN_START_NS;
    for (size_t off = sizeof(struct ts_log_preamble); off < gen_used;) {
        const struct ts_rec_hdr *h = (const struct ts_rec_hdr *)(gen_buf + off);
        last = h->time_ns > last ? h->time_ns : last;
        off += h->len;
    }
    return last - GEN_START_NS;
}

/* The END record, counting every record before it. */
static inline void gen_end(uint32_t tid, uint64_t ns)
{
    uint64_t n = 0;
    for (size_t off = sizeof(struct ts_log_preamble); off < gen_used; n++)
        off += ((const struct ts_rec_hdr *)(gen_buf + off))->len;
    struct ts_rec_end *e = gen_rec(TS_REC_END, sizeof *e, tid, ns);
    e->records_written = n;
}

/* Fills in every record's checksum. */
static inline void gen_seal(void)
{
    for (size_t off = sizeof(struct ts_log_preamble); off < gen_used;) {
        struct ts_rec_hdr *h = (struct ts_rec_hdr *)(gen_buf + off);
        h->check = 0;
        h->check = ts_rec_check(h, h->len);
        off += h->len;
    }
}

/* Writes the log's first n bytes to dir/name; 1 (said on stderr) when that
 * fails. */
static inline int gen_write(const char *dir, const char *name, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(gen_buf, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

/* Ends the log with its END record at ns, seals it and writes it whole. */
static inline int gen_finish(uint32_t tid, uint64_t ns, const char *dir, const char *name)
{
    gen_end(tid, ns);
    gen_seal();
    return gen_write(dir, name, gen_used);
}

#endif
