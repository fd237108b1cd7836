/* msg.c: every line the shim prints on stderr.  One prefix, "trainshim: ",
 * on every line of a message, and one write(2) per message so that messages
 * from different threads (or processes sharing stderr) do not interleave.
 * No stdio: the program's stderr buffer and lock are left alone. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

#define TS_PREFIX "trainshim: "

void ts_msg(const char *level, const char *fmt, ...)
{
    int saved_errno = errno; /* a message must not change what the program sees */
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    int blen = vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (blen < 0)
        blen = 0;
    if ((size_t)blen >= sizeof body) {
        blen = sizeof body - 1;
        memcpy(body + blen - 3, "...", 3); /* shows that the message was cut */
    }

    /* Every line gets the prefix; the level goes on the first one only. */
    char out[sizeof body + 2048];
    size_t len = 0, cap = sizeof out - 1;
    const char *line = body, *end = body + blen;
    bool first = true;
    while (line < end || first) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t llen = nl ? (size_t)(nl - line) : (size_t)(end - line);
        int head = snprintf(out + len, cap - len, "%s%s%s", TS_PREFIX, first && level ? level : "",
                            first && level ? ": " : "");
        if (head < 0 || (size_t)head >= cap - len)
            break;
        len += (size_t)head;
        if (llen > cap - len)
            llen = cap - len;
        memcpy(out + len, line, llen);
        len += llen;
        if (len < cap)
            out[len++] = '\n';
        first = false;
        line += llen + (nl ? 1 : 0);
        if (!nl)
            break;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(STDERR_FILENO, out + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    errno = saved_errno;
}
