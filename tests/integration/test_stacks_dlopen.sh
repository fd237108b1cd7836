#!/usr/bin/env bash
# Stacks through a library dlopen()ed after the first stack was recorded: the
# shim logs a new module map (dl_iterate_phdr's adds counter changed) and the
# report names the library's function.  Builds the library here, then runs
# test_stacks_symbols (which re-executes itself under the shim with
# TRAINSHIM_STACKS=16 and checks the log and the report) with
# TS_STACKS_PLUGIN=<library>.
set -u
B=${B:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
prog=$B/tests/integration/test_stacks_symbols
for f in "$prog" "$B/libtrainshim.so" "$B/trainshim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/plugin.c" <<'C'
#include <cuda_runtime_api.h>
#include <stddef.h>
__attribute__((noinline, visibility("default"))) int plugin_alloc(void **p, size_t n)
{
    int r = (int)cudaMalloc(p, n);
    __asm__ volatile("" ::: "memory");
    return r;
}
C
${CC:-cc} -shared -fPIC -g -O1 -fno-omit-frame-pointer -I"$CUDA_HOME/include" -o "$tmp/libplugin.so" \
  "$tmp/plugin.c" -L"$CUDA_HOME/lib64" -lcudart || { echo "FAIL: cannot build the plugin"; exit 1; }
TS_STACKS_PLUGIN="$tmp/libplugin.so" "$prog" || { echo "FAIL: stacks through the dlopen()ed plugin"; exit 1; }
echo "ok: the dlopen()ed library's allocation site is symbolized"
