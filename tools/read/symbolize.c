/* symbolize.c: offline symbolization with libdwfl.  One Dwfl per module
 * generation, built on first use: each module is reported at its logged
 * load bias, so lookups need no access to the (finished) process.  Results
 * are cached by (generation, address): a report asks for the same frames
 * many times. */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/symbolize.h"

struct generation {
    uint32_t gen;
    struct sym_module *mods;
    size_t n;
    Dwfl *dwfl; /* NULL until first used */
    int tried;
};

struct cache_entry {
    uint64_t addr;
    uint32_t gen;
    int ok;
    struct sym_frame f;
};

struct symbolizer {
    struct generation *gens;
    size_t n_gens;
    struct cache_entry *cache;
    size_t n_cache, cap_cache;
};

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

struct symbolizer *sym_new(void) { return calloc(1, sizeof(struct symbolizer)); }

void sym_free(struct symbolizer *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_gens; i++) {
        if (s->gens[i].dwfl)
            dwfl_end(s->gens[i].dwfl);
        for (size_t k = 0; k < s->gens[i].n; k++)
            free(s->gens[i].mods[k].path);
        free(s->gens[i].mods);
    }
    free(s->gens);
    free(s->cache);
    free(s);
}

int sym_add_generation(struct symbolizer *s, uint32_t gen, const struct sym_module *mods, size_t n)
{
    struct generation *g = realloc(s->gens, (s->n_gens + 1) * sizeof *g);
    if (!g)
        return -1;
    s->gens = g;
    g = &s->gens[s->n_gens];
    memset(g, 0, sizeof *g);
    g->gen = gen;
    g->mods = calloc(n ? n : 1, sizeof *g->mods);
    if (!g->mods)
        return -1;
    for (size_t i = 0; i < n; i++) {
        g->mods[i] = mods[i];
        g->mods[i].path = strdup(mods[i].path ? mods[i].path : "");
        if (!g->mods[i].path) {
            g->n = i;
            s->n_gens++;
            return -1;
        }
    }
    g->n = n;
    s->n_gens++;
    return 0;
}

static struct generation *find_gen(struct symbolizer *s, uint32_t gen)
{
    /* a stack names the generation current when it was logged; fall back to
     * the latest earlier one (its record may have been lost) */
    struct generation *best = NULL;
    for (size_t i = 0; i < s->n_gens; i++)
        if (s->gens[i].gen <= gen && (!best || s->gens[i].gen > best->gen))
            best = &s->gens[i];
    if (!best)
        for (size_t i = 0; i < s->n_gens; i++)
            if (!best || s->gens[i].gen < best->gen)
                best = &s->gens[i];
    return best;
}

static Dwfl *dwfl_of(struct generation *g)
{
    if (g->tried)
        return g->dwfl;
    g->tried = 1;
    Dwfl *d = dwfl_begin(&callbacks);
    if (!d)
        return NULL;
    dwfl_report_begin(d);
    for (size_t i = 0; i < g->n; i++) {
        const char *p = g->mods[i].path;
        if (!p[0] || p[0] != '/')
            continue; /* the vdso and other unnamed mappings: no file to read */
        const char *name = strrchr(p, '/') + 1;
        dwfl_report_elf(d, name, p, -1, g->mods[i].base, false);
    }
    dwfl_report_end(d, NULL, NULL);
    g->dwfl = d;
    return d;
}

/* C++ names are demangled with libstdc++'s __cxa_demangle when that library
 * can be loaded (the tool itself is C and does not link it). */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn demangler(void)
{
    static int tried;
    static demangle_fn fn;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h)
            fn = (demangle_fn)(uintptr_t)dlsym(h, "__cxa_demangle");
    }
    return fn;
}

static void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

static const struct sym_module *module_of(const struct generation *g, uint64_t addr)
{
    for (size_t i = 0; i < g->n; i++)
        if (addr >= g->mods[i].start && addr < g->mods[i].end)
            return &g->mods[i];
    return NULL;
}

static int lookup_uncached(struct symbolizer *s, uint32_t gen, uint64_t addr, struct sym_frame *out)
{
    memset(out, 0, sizeof *out);
    out->addr = addr;
    out->module = "";
    struct generation *g = find_gen(s, gen);
    if (!g)
        return -1;
    const struct sym_module *m = module_of(g, addr);
    if (m) {
        out->module = m->path;
        out->module_base = m->base;
    }
    Dwfl *d = dwfl_of(g);
    if (!d)
        return -1;
    Dwarf_Addr pc = addr ? addr - 1 : 0;
    Dwfl_Module *mod = dwfl_addrmodule(d, pc);
    if (!mod)
        return -1;
    const char *fn = dwfl_module_addrname(mod, pc);
    demangle_fn dm = fn && fn[0] == '_' && fn[1] == 'Z' ? demangler() : NULL;
    char *plain = NULL;
    int status = -1;
    if (dm)
        plain = dm(fn, NULL, NULL, &status);
    copy_str(out->func, sizeof out->func, plain && status == 0 ? plain : fn);
    free(plain);
    char *ver = strchr(out->func, '@'); /* "__libc_start_main@@GLIBC_2.34": the version is noise here */
    if (ver && ver != out->func)
        *ver = 0;
    Dwfl_Line *line = dwfl_module_getsrc(mod, pc);
    if (line) {
        int ln = 0;
        const char *file = dwfl_lineinfo(line, NULL, &ln, NULL, NULL, NULL);
        if (file) {
            copy_str(out->file, sizeof out->file, file);
            out->line = ln;
        }
    }
    return fn ? 0 : -1;
}

static size_t cache_slot(const struct symbolizer *s, uint32_t gen, uint64_t addr)
{
    uint64_t h = (addr ^ ((uint64_t)gen << 56)) * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h >> 20) & (s->cap_cache - 1);
    while (s->cache[i].addr && (s->cache[i].addr != addr || s->cache[i].gen != gen))
        i = (i + 1) & (s->cap_cache - 1);
    return i;
}

static int cache_grow(struct symbolizer *s)
{
    size_t cap = s->cap_cache ? s->cap_cache * 2 : 1024;
    struct cache_entry *old = s->cache, *c = calloc(cap, sizeof *c);
    if (!c)
        return -1;
    size_t old_cap = s->cap_cache;
    s->cache = c;
    s->cap_cache = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].addr)
            s->cache[cache_slot(s, old[i].gen, old[i].addr)] = old[i];
    free(old);
    return 0;
}

int sym_lookup(struct symbolizer *s, uint32_t gen, uint64_t addr, struct sym_frame *out)
{
    /* address 0 is never cached (0 marks an empty slot); it names nothing anyway */
    if (addr && s->cap_cache) {
        size_t i = cache_slot(s, gen, addr);
        if (s->cache[i].addr) {
            *out = s->cache[i].f;
            return s->cache[i].ok;
        }
    }
    int rc = lookup_uncached(s, gen, addr, out);
    if (!addr || ((s->n_cache + 1) * 2 > s->cap_cache && cache_grow(s)))
        return rc;
    s->cache[cache_slot(s, gen, addr)] = (struct cache_entry){ addr, gen, rc, *out };
    s->n_cache++;
    return rc;
}

void sym_format(const struct sym_frame *f, char *buf, size_t n)
{
    const char *file = strrchr(f->file, '/');
    file = file ? file + 1 : f->file;
    if (f->func[0] && file[0])
        snprintf(buf, n, "%s (%s:%d)", f->func, file, f->line);
    else if (f->func[0])
        snprintf(buf, n, "%s", f->func);
    else if (f->module && f->module[0]) {
        const char *m = strrchr(f->module, '/');
        snprintf(buf, n, "%s+0x%" PRIx64, m ? m + 1 : f->module, f->addr - f->module_base);
    } else
        snprintf(buf, n, "0x%" PRIx64, f->addr);
}
