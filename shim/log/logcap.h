/* logcap.h: the log's size cap (TRAINSHIM_LOG_MAX), used by the writer
 * (log.c) only.  Past the cap, per-event records are folded into per-site
 * totals (logfmt.h, TS_REC_SITE_TOTAL) written at shutdown. */
#ifndef TRAINSHIM_LOGCAP_H
#define TRAINSHIM_LOGCAP_H
#include <stdbool.h>
#include <stdint.h>

#include "log/logfmt.h"

/* cap_bytes 0: no cap, and every other call is a no-op. */
void ts_logcap_init(uint64_t cap_bytes);
bool ts_logcap_enabled(void);
/* Sealed records about to be written, in place: every record is seen (the
 * allocation replay behind the peak); once file_bytes plus what is kept
 * would pass the cap, per-event records are folded and the kept ones moved
 * to the front.  Returns the bytes kept and sets *kept_records.  Not
 * async-signal-safe: the signal-time flush does not call it. */
uint32_t ts_logcap_filter(char *p, uint32_t n, uint64_t file_bytes, uint64_t *kept_records);
/* At shutdown: the TS_REC_LOG_CAPPED and TS_REC_SITE_TOTAL records, sealed,
 * back to back in a malloc'ed block (*len bytes, *records of them); NULL when
 * nothing was folded. */
char *ts_logcap_final_records(uint32_t *len, uint64_t *records);
#endif
