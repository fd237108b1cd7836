/* libFuzzer harness for the streaming log reader (tslog_read_file, which
 * reads a file record by record and keeps only the valid bytes): any bytes,
 * written to a memory file, must read exactly as the in-memory parser
 * (tslog_parse) reads them: the same verdict, error or note, the same
 * records, the same stopping offset, and log->raw equal to the bytes before
 * it.  Each input is tried as is and with every record's check recomputed,
 * so that mutated record bodies reach the per-type parsers.  Built and run
 * by tests/fuzz/run.sh with -fsanitize=fuzzer,address,undefined. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "../../tools/read/logread.c"
#include "fuzz_checks.h"

static int memfd = -1;

static void same_or_abort(const struct tslog *s, const struct tslog *p, int rs, int rp)
{
    if (rs != rp || strcmp(s->error, p->error))
        abort();
    if (rs)
        return;
    if (strcmp(s->note, p->note) || s->n_records != p->n_records || s->stop_offset != p->stop_offset
        || s->truncated != p->truncated || s->complete != p->complete || s->n_events != p->n_events
        || s->n_gemms != p->n_gemms || s->n_nccls != p->n_nccls || s->n_unknown != p->n_unknown
        || s->file_size != p->file_size || s->raw_size != s->stop_offset || p->raw_size != p->stop_offset
        || memcmp(s->raw, p->raw, s->raw_size))
        abort();
}

static void one(const uint8_t *data, size_t size)
{
    if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    struct tslog s, p;
    int rs = tslog_read_file(path, &s);
    int rp = tslog_parse(data, size, path, &p);
    same_or_abort(&s, &p, rs, rp);
    tslog_free(&s);
    tslog_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memfd < 0 && (memfd = memfd_create("fuzz-log", 0)) < 0)
        abort();
    one(data, size);
    uint8_t *copy = fuzz_with_valid_checks(data, size);
    one(copy, size);
    free(copy);
    return 0;
}
