/* cmd_export.c: `trainshim export --type chrome-trace|memory-snapshot|svg
 * LOG... -o FILE`.  Reads the logs, hands them to the format's writer, and
 * replaces FILE only when the whole export was written (a temporary file
 * renamed over it). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "export/export.h"

uint64_t export_wall_ns(const struct tslog *log, uint64_t mono_ns)
{
    if (!log->have_header)
        return mono_ns;
    return log->start_realtime_ns + (mono_ns - log->start_mono_ns);
}

void export_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static int usage(void)
{
    fprintf(stderr, "usage: trainshim export --type chrome-trace|memory-snapshot|svg LOG... -o FILE\n"
                    "  chrome-trace     JSON for Perfetto / chrome://tracing: one process per log,\n"
                    "                   copies, GEMMs and collectives as slices per stream, allocated\n"
                    "                   memory as counters\n"
                    "  memory-snapshot  a PyTorch memory snapshot pickle (pytorch.org/memory_viz), one log,\n"
                    "                   with the call stacks of TRAINSHIM_STACKS as frames\n"
                    "  svg              the allocated-memory timeline as an SVG picture\n");
    return 2;
}

typedef int (*export_writer)(FILE *, const struct export_input *);

/* Writes the export into a temporary file renamed over out once whole ("-":
 * standard output); 0 when written. */
static int write_output(const char *out, export_writer writer, const struct export_input *in)
{
    size_t tl = strlen(out) + 32;
    char *tmp = malloc(tl);
    FILE *f = NULL;
    int rc = 0;
    if (tmp) {
        snprintf(tmp, tl, "%s.tmp.%d", out, (int)getpid());
        f = !strcmp(out, "-") ? stdout : fopen(tmp, "wb");
    }
    if (!f) {
        fprintf(stderr, "trainshim: error: cannot create %s\n", out);
        free(tmp);
        return 1;
    }
    rc = writer(f, in);
    if (fflush(f) != 0 || ferror(f))
        rc = 1;
    if (f != stdout) {
        if (fclose(f) != 0)
            rc = 1;
        if (!rc && rename(tmp, out) != 0)
            rc = 1;
        if (rc) {
            unlink(tmp);
            fprintf(stderr, "trainshim: error: cannot write %s\n", out);
        }
    }
    free(tmp);
    return rc;
}

static export_writer writer_of(const char *type)
{
    if (type && !strcmp(type, "chrome-trace"))
        return export_chrome;
    if (type && !strcmp(type, "memory-snapshot"))
        return export_snapshot;
    if (type && !strcmp(type, "svg"))
        return export_svg;
    return NULL;
}

int cmd_export(int argc, char **argv)
{
    const char *type = NULL, *out = NULL;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    int n = 0;
    if (!files)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--type") || !strcmp(a, "-t")) {
            type = i + 1 < argc ? argv[++i] : NULL;
        } else if (!strncmp(a, "--type=", 7)) {
            type = a + 7;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = i + 1 < argc ? argv[++i] : NULL;
        } else if (!strncmp(a, "--output=", 9)) {
            out = a + 9;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            free(files);
            usage();
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "trainshim: error: unknown option '%s'\n", a);
            free(files);
            return usage();
        } else {
            files[n++] = argv[i];
        }
    }
    export_writer writer = writer_of(type);
    if (!writer || !out || n == 0) {
        if (type && !writer)
            fprintf(stderr, "trainshim: error: unknown export type '%s'\n", type);
        free(files);
        return usage();
    }
    if (writer == export_snapshot && n != 1) {
        fprintf(stderr, "trainshim: error: a memory snapshot is of one log (one process)\n");
        free(files);
        return 2;
    }
    struct export_input in = { calloc((size_t)n, sizeof(struct tslog)), n };
    int rc = in.logs ? 0 : 1;
    for (int i = 0; i < n && !rc; i++) {
        if (tslog_read_file(files[i], &in.logs[i]) != 0) {
            fprintf(stderr, "trainshim: error: %s\n", in.logs[i].error);
            rc = 1;
        } else if (in.logs[i].note[0])
            fprintf(stderr, "trainshim: warning: %s: %s\n", in.logs[i].file, in.logs[i].note);
    }
    if (!rc)
        rc = write_output(out, writer, &in);
    for (int i = 0; i < n && in.logs; i++)
        tslog_free(&in.logs[i]);
    free(in.logs);
    free(files);
    return rc;
}
