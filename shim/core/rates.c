/* rates.c: ts_parse_rates (core/config.h), the parser of per-name rates
 * such as TRAINSHIM_PEAK_TFLOPS.  On its own, with no dependency, because
 * the report (tools/report) parses a run's logged value with it too. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "core/config.h"

/* Index of the '|'-separated name equal to s[0..len) (any case), or -1. */
static int name_index(const char *names, const char *s, size_t len)
{
    int i = 0;
    for (const char *v = names; v; i++) {
        const char *bar = strchr(v, '|');
        size_t vlen = bar ? (size_t)(bar - v) : strlen(v);
        if (vlen == len && !strncasecmp(v, s, len))
            return i;
        v = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* One rate: a finite number > 0 ending at a ',' or the string's end. */
static const char *parse_rate(const char *s, const char **end, double *out)
{
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (e == s || (*e && *e != ','))
        return "not a number";
    if (errno == ERANGE || !isfinite(v))
        return "out of range";
    if (!(v > 0))
        return "must be greater than 0";
    *end = e;
    *out = v;
    return NULL;
}

const char *ts_parse_rates(const char *s, const char *names, double *out, int n)
{
    double tmp[16] = { 0 }, v;
    const char *end, *err;
    if (n > 16)
        return "too many names";
    if (!strchr(s, '=')) {
        if ((err = parse_rate(s, &end, &v)))
            return err;
        if (*end)
            return "one number, or name=number,...";
        for (int i = 0; i < n; i++)
            out[i] = v;
        return NULL;
    }
    while (*s) {
        const char *eq = strchr(s, '=');
        int i = eq ? name_index(names, s, (size_t)(eq - s)) : -1;
        if (i < 0 || i >= n)
            return "unknown name before '=' (one number, or name=number,...)";
        if ((err = parse_rate(eq + 1, &end, &tmp[i])))
            return err;
        if (*end && !end[1])
            return "a trailing ','";
        s = *end ? end + 1 : end;
    }
    memcpy(out, tmp, (size_t)n * sizeof *out);
    return NULL;
}
