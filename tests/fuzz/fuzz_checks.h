/* fuzz_checks.h: for the log fuzzers, the input again with every record's
 * check made valid, so that mutations reach the record decoders instead of
 * stopping at a check mismatch.  An exact-size malloc'd copy (ASan sees
 * overreads); the caller frees it.  Include after logfmt.h. */
#ifndef TRAINSHIM_FUZZ_CHECKS_H
#define TRAINSHIM_FUZZ_CHECKS_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *fuzz_with_valid_checks(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    for (size_t off = sizeof(struct ts_log_preamble); off + sizeof(struct ts_rec_hdr) <= size;) {
        struct ts_rec_hdr h;
        memcpy(&h, copy + off, sizeof h);
        if (h.len < sizeof h || h.len % 8 || h.len > size - off)
            break;
        h.check = ts_rec_check(copy + off, h.len);
        memcpy(copy + off + offsetof(struct ts_rec_hdr, check), &h.check, sizeof h.check);
        off += h.len;
    }
    return copy;
}
#endif
