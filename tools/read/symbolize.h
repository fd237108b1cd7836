/* symbolize.h: names the raw addresses of TS_REC_STACK records at report
 * time (tools/read/symbolize.c, elfutils libdwfl): function from the symbol
 * table, file:line from DWARF when the module has debug info. */
#ifndef TRAINSHIM_SYMBOLIZE_H
#define TRAINSHIM_SYMBOLIZE_H
#include <stddef.h>
#include <stdint.h>

/* One module of a TS_REC_MODULES generation. */
struct sym_module {
    uint64_t base, start, end;
    char *path;
};

struct sym_frame {
    uint64_t addr;
    char func[256];       /* "" when unknown */
    char file[512];       /* source file, "" when unknown */
    int line;             /* 0 when unknown */
    const char *module;   /* path of the module (owned by the symbolizer), or "" */
    uint64_t module_base; /* its load bias */
};

struct symbolizer;

struct symbolizer *sym_new(void);
void sym_free(struct symbolizer *s);
/* Declares the modules of generation gen (the array is copied). */
int sym_add_generation(struct symbolizer *s, uint32_t gen, const struct sym_module *mods, size_t n);
/* Names return address addr seen in a stack of generation gen (the lookup
 * uses addr - 1, inside the call).  Always fills *out; returns 0 when a
 * function name was found. */
int sym_lookup(struct symbolizer *s, uint32_t gen, uint64_t addr, struct sym_frame *out);
/* The short form "func (file:line)" / "func" / "module+0xoff" / "0xaddr". */
void sym_format(const struct sym_frame *f, char *buf, size_t n);
#endif
