/* trainshim: run a job under the shim, summarize its logs, export, replay. */
#include <stdio.h>
#include <string.h>
#include "cmd/cmds.h"

/* A subcommand whose file is not built yet is absent, not a link error. */
#pragma weak cmd_run
#pragma weak cmd_report
#pragma weak cmd_config
#pragma weak cmd_export
#pragma weak cmd_replay

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    { "run", cmd_run, "run [--log TEMPLATE] [--] CMD...   run CMD with the shim preloaded" },
    { "report", cmd_report, "report [--format text|json] LOG...   summarize event logs" },
    { "config", cmd_config, "config   print every option with its default and help" },
    { "export", cmd_export, "export --type chrome-trace|memory-snapshot|svg LOG... -o FILE" },
    { "replay", cmd_replay, "replay FILE   replay a PyTorch memory snapshot against the allocator" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: trainshim COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].fn)
            fprintf(f, "  %s\n", commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].fn && !strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "trainshim: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
