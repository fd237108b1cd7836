/* Every record type goes through the real writer (ts_ev_*, ts_register_apis,
 * ts_log_write_record) into a file named by TRAINSHIM_LOG, and comes back
 * field by field through the real reader (tools/read/logread.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"
#include "../../tools/read/logread.c"

static int failures;
#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            failures++;                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);               \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

static uint64_t mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
    (void)argc;
    char dir[] = "/tmp/ts_log_rt.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "%s/sub/dir/rt.%%p.log", dir);
    setenv("TRAINSHIM_LOG", tmpl, 1);
    setenv("TRAINSHIM_LOG_BUFFER", "4096", 1); /* small: forces buffer hand-overs */
    setenv("RANK", "3", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("WORLD_SIZE", "8", 1);

    static const char *const names[] = {"cudaMalloc", "cudaFree", "cudaMemcpy", NULL, "cuMemAlloc_v2"};
    ts_register_apis(names, 5);

    /* nothing logged yet: no file */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    struct stat st;
    CHECK(stat(sub, &st) != 0, "the log directory exists before the first event");

    uint64_t t0 = mono();
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    ts_ev_device(0, "Emulated GPU \"A\"", 80ull << 30, 9, 0, 132, "0000:3b:00.0");
    ts_ev_device(0, "duplicate", 1, 1, 1, 1, "x"); /* dropped: device 0 is known */
    char longname[400];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ts_ev_device(1, longname, 40ull << 30, 8, 6, 84, "0000:af:00.0");
    ts_ev_alloc(0, 1, 0x7f0000001000ull, 123456789, 0xabcd, 0);
    ts_ev_alloc(4, 0, 0, 1ull << 40, 0, 2); /* failed */
    ts_ev_free(1, 1, 0x7f0000001000ull, 0x1234, 0);
    ts_ev_free(1, -1, 0xdead, 0, 1);
    ts_ev_copy(2, TS_H2D, 4096, TS_HOST_PAGEABLE, 0, false, 777, 0);
    ts_ev_copy(2, TS_D2H, 1ull << 33, TS_HOST_PINNED, 0x55, true, 123456789012ull, 0);
    ts_ev_copy(2, TS_PEER, 1, TS_HOST_NONE, 7, true, 1, 700);
    ts_ev_error(0, 2);
    ts_ev_error(-5, -7);
    /* enough events to fill several 4 KiB buffers */
    for (int i = 0; i < 500; i++)
        ts_ev_alloc(0, 0, 0x1000ull * (uint64_t)(i + 1), (uint64_t)i, 0, 0);
    /* a later API table: a record in the stream */
    static const char *const names2[] = {"cudaMalloc", "cudaFree", "cudaMemcpy", "ncclAllReduce"};
    ts_register_apis(names2, 4);
    /* unknown record types, one small and one larger than a buffer */
    struct {
        struct ts_rec_hdr h;
        uint64_t payload[3];
    } small = {{.len = sizeof small, .type = 1000}, {1, 2, 3}};
    CHECK(ts_log_write_record(&small.h) == 0, "small unknown record");
    size_t biglen = 3 * 4096 + 64;
    struct ts_rec_hdr *big = calloc(1, biglen);
    big->len = (uint32_t)biglen;
    big->type = 1001;
    CHECK(ts_log_write_record(big) == 0, "big unknown record");
    free(big);
    ts_ev_error(3, 42);
    uint64_t t1 = mono();

    char path[4096];
    snprintf(path, sizeof path, "%s", ts_log_path());
    char want[4096];
    snprintf(want, sizeof want, "%s/sub/dir/rt.%d.log", dir, (int)getpid());
    CHECK(!strcmp(path, want), "log path %s, want %s", path, want);
    ts_log_shutdown();
    ts_log_shutdown(); /* idempotent */
    ts_ev_error(9, 9); /* after shutdown: dropped */

    struct tslog log;
    int rc = tslog_read_file(want, &log);
    CHECK(rc == 0, "read: %s", log.error);
    if (rc)
        return 1;
    CHECK(log.complete, "no end record");
    CHECK(!log.truncated && !log.note[0], "note: %s", log.note);
    CHECK(log.version_major == TS_LOG_VERSION_MAJOR, "version");
    CHECK(log.pid == getpid(), "pid %d", log.pid);
    CHECK(log.rank == 3 && log.local_rank == 1 && log.world_size == 8, "rank %d/%d/%d", log.rank,
          log.local_rank, log.world_size);
    char host[256] = "";
    gethostname(host, sizeof host);
    CHECK(!strcmp(log.host, host), "host %s", log.host);
    CHECK(!strcmp(log.command, argv[0]), "command '%s' vs '%s'", log.command, argv[0]);
    CHECK(strstr(log.config, "TRAINSHIM_LOG=") && strstr(log.config, "TRAINSHIM_LOG_BUFFER=4096"),
          "config: %s", log.config);
    CHECK(log.start_mono_ns >= t0 - 1000000000ull && log.start_mono_ns <= t1, "start mono");
    CHECK(log.start_realtime_ns > 1600000000ull * 1000000000ull, "start realtime");
    CHECK(log.end_records_dropped == 0, "dropped %llu", (unsigned long long)log.end_records_dropped);
    CHECK(log.n_unknown == 2, "unknown records %llu", (unsigned long long)log.n_unknown);
    CHECK(log.n_by_type[TS_REC_API_NAMES] == 2, "api name records %llu",
          (unsigned long long)log.n_by_type[TS_REC_API_NAMES]);
    char nb[32];
    CHECK(log.n_api_names == 5, "api names %u", log.n_api_names);
    CHECK(!strcmp(tslog_api_name(&log, 3, nb, sizeof nb), "ncclAllReduce"), "later table wins");
    CHECK(!strcmp(tslog_api_name(&log, 4, nb, sizeof nb), "cuMemAlloc_v2"), "first table kept");
    CHECK(!strcmp(tslog_api_name(&log, 0, nb, sizeof nb), "cudaMalloc"), "name 0");
    CHECK(!strcmp(tslog_api_name(&log, 77, nb, sizeof nb), "api#77"), "unknown id");

    CHECK(log.n_devices == 2, "devices %zu", log.n_devices);
    if (log.n_devices == 2) {
        struct tslog_device *d = &log.devices[0];
        CHECK(d->ordinal == 0 && d->total_mem == 80ull << 30 && d->cc_major == 9 && d->cc_minor == 0 &&
                  d->sm_count == 132 && !strcmp(d->name, "Emulated GPU \"A\"") &&
                  !strcmp(d->pci_bus_id, "0000:3b:00.0"),
              "device 0 fields");
        d = &log.devices[1];
        CHECK(d->ordinal == 1 && d->cc_major == 8 && d->cc_minor == 6 && d->sm_count == 84 &&
                  strlen(d->name) == TS_DEVICE_NAME_LEN - 1 && d->name[0] == 'n',
              "device 1 fields (name truncated to %d)", TS_DEVICE_NAME_LEN - 1);
    }

    CHECK(log.n_events == 9 + 500 + 1, "events %zu", log.n_events);
    if (log.n_events == 510) {
        struct tslog_event *e = log.events;
        CHECK(e[0].type == TS_REC_ALLOC && e[0].api == 0 && e[0].device == 1 &&
                  e[0].ptr == 0x7f0000001000ull && e[0].bytes == 123456789 && e[0].stream == 0xabcd &&
                  e[0].result == 0, "alloc 0");
        CHECK(e[1].type == TS_REC_ALLOC && e[1].api == 4 && e[1].ptr == 0 && e[1].bytes == 1ull << 40 &&
                  e[1].result == 2, "alloc 1");
        CHECK(e[2].type == TS_REC_FREE && e[2].api == 1 && e[2].device == 1 &&
                  e[2].ptr == 0x7f0000001000ull && e[2].stream == 0x1234 && e[2].result == 0, "free 0");
        CHECK(e[3].type == TS_REC_FREE && e[3].device == -1 && e[3].ptr == 0xdead && e[3].result == 1,
              "free 1");
        CHECK(e[4].type == TS_REC_COPY && e[4].api == 2 && e[4].dir == TS_H2D && e[4].bytes == 4096 &&
                  e[4].host_kind == TS_HOST_PAGEABLE && e[4].stream == 0 && !e[4].async &&
                  e[4].duration_ns == 777 && e[4].result == 0, "copy 0");
        CHECK(e[5].type == TS_REC_COPY && e[5].dir == TS_D2H && e[5].bytes == 1ull << 33 &&
                  e[5].host_kind == TS_HOST_PINNED && e[5].stream == 0x55 && e[5].async &&
                  e[5].duration_ns == 123456789012ull, "copy 1");
        CHECK(e[6].type == TS_REC_COPY && e[6].dir == TS_PEER && e[6].host_kind == TS_HOST_NONE &&
                  e[6].result == 700, "copy 2");
        CHECK(e[7].type == TS_REC_ERROR && e[7].api == 0 && e[7].result == 2, "error 0");
        CHECK(e[8].type == TS_REC_ERROR && e[8].api == -5 && e[8].result == -7, "error 1");
        for (int i = 0; i < 500; i++)
            if (e[9 + i].type != TS_REC_ALLOC || e[9 + i].ptr != 0x1000ull * (uint64_t)(i + 1) ||
                e[9 + i].bytes != (uint64_t)i) {
                CHECK(0, "bulk alloc %d", i);
                break;
            }
        CHECK(e[509].type == TS_REC_ERROR && e[509].api == 3 && e[509].result == 42, "last error");
        uint64_t prev = log.start_mono_ns;
        for (size_t i = 0; i < log.n_events; i++) {
            CHECK(e[i].tid == tid, "tid %u", e[i].tid);
            CHECK(e[i].time_ns >= prev && e[i].time_ns <= t1, "time order at %zu", i);
            prev = e[i].time_ns;
        }
    }
    tslog_free(&log);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
