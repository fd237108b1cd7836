/* config_capture.h: ts_config_load with what it prints on stderr captured,
 * for the configuration tests (test_config_env, test_config_ranges). */
#ifndef TRAINSHIM_TESTS_CONFIG_CAPTURE_H
#define TRAINSHIM_TESTS_CONFIG_CAPTURE_H
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/config.h"

/* Loads envp into cfg; out gets stderr's text (NUL-terminated, n bytes at
 * most).  Returns ts_config_load's problem count. */
static inline int config_load_captured(struct ts_config *cfg, char **envp, char *out, size_t n)
{
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    fflush(stderr);
    int saved = dup(2);
    dup2(fds[1], 2);
    close(fds[1]);
    int problems = ts_config_load(cfg, envp, false);
    dup2(saved, 2);
    close(saved);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    ssize_t got = read(fds[0], out, n - 1);
    out[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    return problems;
}
#endif
