/* report_offload.h: the OFFLOAD part of `trainshim report`
 * (tools/report/report_offload.c), from the TS_REC_OFFLOAD records memory
 * offload writes (TRAINSHIM_OFFLOAD=on or managed).  Read from the log file
 * itself, like the GPU and call-stack parts: a bad record ends the reading. */
#ifndef TRAINSHIM_REPORT_OFFLOAD_H
#define TRAINSHIM_REPORT_OFFLOAD_H
#include <stdio.h>

#include "read/logread.h"

/* Prints "== OFFLOAD ==" and its lines when the log has offload records;
 * nothing otherwise. */
void offload_report_text(FILE *f, const struct tslog *log);
#endif
