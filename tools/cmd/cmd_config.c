/* trainshim config [--markdown | --effective]: the option table
 * (shim/core/options.def) for people, for the README, and as this environment
 * sets it. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmds.h"
#include "core/config.h"

extern char **environ;

static void print_type(FILE *f, const struct ts_option_info *o, bool markdown)
{
    if (o->type != TS_ENUM || !o->values) {
        fputs(o->type_name, f);
        return;
    }
    fputs("one of ", f);
    for (const char *v = o->values; *v; v++) {
        if (v == o->values || v[-1] == '|')
            fputs(markdown ? "`" : "", f);
        if (*v == '|') { /* the closing backtick was printed after the value */
            fputs(", ", f);
            continue;
        }
        fputc(*v, f);
        if (!v[1] || v[1] == '|')
            fputs(markdown ? "`" : "", f);
    }
}

/* A table cell: '|' would end it. */
static void print_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
}

static void print_markdown(FILE *f)
{
    fputs("| Variable | Type | Default | Meaning |\n", f);
    fputs("|---|---|---|---|\n", f);
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        const struct ts_option_info *o = ts_option_at(i);
        fprintf(f, "| `%s` | ", o->env);
        print_type(f, o, true);
        fputs(" | ", f);
        if (*o->def) {
            fputc('`', f);
            print_cell(f, o->def);
            fputc('`', f);
        } else {
            fputs("(empty)", f);
        }
        fputs(" | ", f);
        print_cell(f, o->help);
        fputs(" |\n", f);
    }
}

static void print_list(FILE *f)
{
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        const struct ts_option_info *o = ts_option_at(i);
        fprintf(f, "%s  (", o->env);
        print_type(f, o, false);
        fprintf(f, ", default %s)\n    %s\n", *o->def ? o->def : "(empty)", o->help);
    }
    fputs("\nTRAINSHIM=0 turns the shim off (every call passes through untouched).\n"
          "TRAINSHIM_CONF=name:value,name:value sets options in one variable (names in any\n"
          "case, e.g. log_buffer:1MiB); an individual TRAINSHIM_<NAME> variable wins.\n"
          "Sizes: bytes, or K M G T / KiB MiB GiB TiB (powers of 1024), KB MB GB TB\n"
          "(powers of 1000); decimals allowed with a suffix (1.5GiB).  Booleans: 1/0,\n"
          "true/false, yes/no, on/off.\n",
          f);
}

static int print_effective(FILE *f)
{
    static struct ts_config cfg; /* large: not on the stack */
    static const char *const source_names[] = { "default", "variable", "TRAINSHIM_CONF" };
    int problems = ts_config_load(&cfg, environ, false);
    if (ts_config_disabled(&cfg))
        fputs("# TRAINSHIM=0: the shim is off (pure passthrough); these values are unused\n", f);
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        const struct ts_option_info *o = ts_option_at(i);
        char value[TS_CONFIG_STRSPACE];
        ts_option_format_value(&cfg, i, value, sizeof value);
        fprintf(f, "%s=%s  # %s\n", o->env, value, source_names[ts_option_source(&cfg, i)]);
    }
    if (problems)
        fprintf(f, "# %d problem%s (see the messages above)%s\n", problems, problems == 1 ? "" : "s",
                cfg.strict ? "; with TRAINSHIM_STRICT set the shim would exit" : "");
    return problems ? 1 : 0;
}

int cmd_config(int argc, char **argv)
{
    enum { LIST, MARKDOWN, EFFECTIVE } mode = LIST;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--markdown"))
            mode = MARKDOWN;
        else if (!strcmp(argv[i], "--effective"))
            mode = EFFECTIVE;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: trainshim config [--markdown | --effective]\n"
                   "  (no option)  every option: variable, type, default, meaning\n"
                   "  --markdown   the README's options table\n"
                   "  --effective  the values this environment gives (exit 1 if any is invalid)\n");
            return 0;
        } else {
            fprintf(stderr, "trainshim: error: config: unknown argument '%s' (see trainshim config --help)\n",
                    argv[i]);
            return 2;
        }
    }
    switch (mode) {
    case MARKDOWN: print_markdown(stdout); break;
    case EFFECTIVE: return print_effective(stdout);
    case LIST: print_list(stdout); break;
    }
    return 0;
}
