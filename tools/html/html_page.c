/* html_page.c: the page itself: the stylesheet and the script (page.css,
 * page.js beside this file, assembled into the binary so the tool needs no
 * files at run time), then the data (html_data.c) in one
 * <script type="application/json"> element the script draws from. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "html/html_report.h"

/* .incbin paths are relative to the directory the compiler runs in: the
 * repository's root, as for every build of tools/. */
__asm__(".pushsection .rodata\n"
        ".globl html_page_css\n.hidden html_page_css\n.type html_page_css, @object\n"
        "html_page_css:\n.incbin \"tools/html/page.css\"\n.byte 0\n"
        ".globl html_page_js\n.hidden html_page_js\n.type html_page_js, @object\n"
        "html_page_js:\n.incbin \"tools/html/page.js\"\n.byte 0\n"
        ".popsection\n");
extern const char html_page_css[], html_page_js[];

/* JSON text inside a <script> element: '<' only occurs inside strings, where
 * \u003c means the same, so no "</script>" or "<!--" can end it early. */
static void write_script_json(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<')
            fputs("\\u003c", f);
        else
            fputc(s[i], f);
    }
}

/* The title: the first log's command, HTML-escaped. */
static void write_title(FILE *f, const struct html_input *in)
{
    const char *cmd = in->n > 0 && in->logs[0].command ? in->logs[0].command : "";
    fputs("<title>trainshim report: ", f);
    for (size_t i = 0; cmd[i] && i < 120; i++) {
        unsigned char c = (unsigned char)cmd[i];
        if (c == '<')
            fputs("&lt;", f);
        else if (c == '&')
            fputs("&amp;", f);
        else if (c >= 0x20 && c != 0x7f)
            fputc(c, f);
    }
    fputs("</title>\n", f);
}

static int write_page(FILE *f, const struct html_input *in)
{
    char *data = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&data, &n);
    if (!mem)
        return -1;
    int rc = html_data_write(mem, in);
    if (fclose(mem) || rc) {
        free(data);
        return -1;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
          f);
    write_title(f, in);
    fprintf(f, "<style>\n%s</style>\n</head>\n<body>\n", html_page_css);
    fputs("<main id=\"app\"><noscript>This report draws its charts with JavaScript; the data is in the "
          "trainshim-data element of this file.</noscript></main>\n",
          f);
    fputs("<script type=\"application/json\" id=\"trainshim-data\">\n", f);
    write_script_json(f, data, n);
    fprintf(f, "</script>\n<script>\n%s</script>\n</body>\n</html>\n", html_page_js);
    free(data);
    return 0;
}

int html_report_write(const char *path, const struct html_input *in)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "trainshim: error: --html %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = write_page(f, in);
    if (fclose(f) || rc) {
        fprintf(stderr, "trainshim: error: --html %s: cannot write the page%s\n", path,
                rc ? " (out of memory)" : "");
        return -1;
    }
    fprintf(stderr, "trainshim: HTML report: %s\n", path);
    return 0;
}
