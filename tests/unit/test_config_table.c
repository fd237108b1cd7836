/* The option table itself (shim/core/options.def, edited by every feature): names,
 * types, defaults that parse, enum values, help, lookup by name.  Catches a
 * bad line added to options.def before any process runs with it. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static const char *parse_default(const struct ts_option_info *o)
{
    bool b;
    uint64_t u;
    int e;
    struct ts_fraction_or_size f;
    switch (o->type) {
    case TS_BOOL: return ts_parse_bool(o->def, &b);
    case TS_SIZE: return ts_parse_size(o->def, &u);
    case TS_COUNT: return ts_parse_count(o->def, &u);
    case TS_ENUM: return o->values ? ts_parse_enum(o->def, o->values, &e) : "enum without values";
    case TS_PATH: return ts_check_template(o->def);
    case TS_STRING: return NULL;
    case TS_FRACTION_OR_SIZE: return ts_parse_fraction_or_size(o->def, &f);
    }
    return "unknown type";
}

int main(void)
{
    CHECK(TS_OPTION_COUNT > 0, "the table is empty");
    CHECK(ts_option_at(-1) == NULL && ts_option_at(TS_OPTION_COUNT) == NULL, "out of range");
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        const struct ts_option_info *o = ts_option_at(i);
        CHECK(o && o->name && *o->name, "option %d has a name", i);
        if (!o)
            continue;
        for (const char *c = o->name; *c; c++)
            CHECK(isupper((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_',
                  "%s: names are upper case", o->name);
        char env[128];
        snprintf(env, sizeof env, "TRAINSHIM_%s", o->name);
        CHECK(!strcmp(env, o->env), "%s: variable %s", o->name, o->env);
        CHECK(strcmp(o->name, "CONF") != 0, "CONF is TRAINSHIM_CONF itself, not an option");
        CHECK(o->type_name && *o->type_name, "%s: type name", o->name);
        CHECK(o->def != NULL, "%s: has a default", o->name);
        if (o->def) {
            const char *err = parse_default(o);
            CHECK(!err, "%s: default '%s' does not parse as %s: %s", o->name, o->def, o->type_name, err);
        }
        CHECK((o->type == TS_ENUM) == (o->values != NULL), "%s: enum values iff enum", o->name);
        if (o->values) {
            CHECK(*o->values && !strstr(o->values, "||") && o->values[strlen(o->values) - 1] != '|',
                  "%s: values '%s' well formed", o->name, o->values);
        }
        CHECK(o->help && strlen(o->help) > 10 && !strchr(o->help, '\n'), "%s: one-line help", o->name);
        for (int k = 0; k < i; k++)
            CHECK(strcasecmp(ts_option_at(k)->name, o->name) != 0, "%s: duplicate name", o->name);
        /* lookup: any case, with or without the prefix */
        char lower[128];
        size_t n = strlen(o->name);
        for (size_t k = 0; k <= n; k++)
            lower[k] = (char)tolower((unsigned char)o->name[k]);
        CHECK(ts_option_find(o->name, n) == i, "%s: find", o->name);
        CHECK(ts_option_find(lower, n) == i, "%s: find lower case", o->name);
        CHECK(ts_option_find(o->env, strlen(o->env)) == i, "%s: find with prefix", o->name);
    }
    CHECK(ts_option_find("NO_SUCH_OPTION", 14) == -1, "unknown name");
    CHECK(ts_option_find("LOG", 2) == -1, "a prefix of a name is not the name");
    CHECK(ts_option_find("", 0) == -1, "empty name");

    /* the defaults load cleanly: nothing printed, nothing counted */
    static struct ts_config cfg;
    char *envp[] = {NULL};
    CHECK(ts_config_load(&cfg, envp, false) == 0, "defaults load without problems");
    char value[256];
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        const struct ts_option_info *o = ts_option_at(i);
        ts_option_format_value(&cfg, i, value, sizeof value);
        if (o->type == TS_PATH || o->type == TS_STRING || o->type == TS_ENUM || o->type == TS_BOOL) {
            bool want_b;
            if (o->type == TS_BOOL && !ts_parse_bool(o->def, &want_b))
                CHECK(!strcmp(value, want_b ? "1" : "0"), "%s: formatted %s", o->name, value);
            else if (o->type != TS_BOOL)
                CHECK(!strcasecmp(value, o->def), "%s: formatted default %s vs %s", o->name, value, o->def);
        }
    }
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_config_table: %d options checked\n", TS_OPTION_COUNT);
    return 0;
}
