#!/usr/bin/env bash
# Every symbol hooks/hooks.def hooks exists in the real CUDA 13 toolkit
# library it names (nm -D); every _ptds/_ptsz twin has the signature the
# toolkit header gives it in per-thread-default-stream mode (the base names
# are checked by the compiler when the hooks are built); and libtrainshim.so
# exports exactly the hooked symbols plus dlsym and trainshim's own API
# (trainshim_pause, trainshim_resume, trainshim_tag): nothing of the core leaks
# (-fvisibility=hidden).
set -u
B=${B:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
lib="$B/libtrainshim.so"
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
declare -A file=([cudart]=$CUDA_HOME/lib64/libcudart.so.13 [cuda]=$CUDA_HOME/lib64/stubs/libcuda.so
                 [nccl]=$CUDA_HOME/lib64/libnccl.so.2 [cublas]=$CUDA_HOME/lib64/libcublas.so.13
                 [cublasLt]=$CUDA_HOME/lib64/libcublasLt.so.13)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for l in "${!file[@]}"; do
  nm -D --defined-only "${file[$l]}" | awk '{print $NF}' | sed 's/@.*//' | sort -u > "$tmp/$l.real"
  [ -s "$tmp/$l.real" ] || { echo "FAIL: cannot read exports of ${file[$l]}"; exit 1; }
done
# TS_HOOK(lib, ret, name, (params), (args), variant, body): expand twins.
fail=0; hooked=0
while IFS='|' read -r l name variant body; do
  names=$name
  case $variant in PTDS) names="$names ${name}_ptds";; PTSZ) names="$names ${name}_ptsz";; esac
  for n in $names; do
    if ! grep -qx "$n" "$tmp/$l.real"; then echo "FAIL: $n is not exported by ${file[$l]}"; fail=1; fi
    [ "$body" = REAL ] || { echo "$n" >> "$tmp/hooked"; hooked=$((hooked+1)); }
  done
done < <(grep '^TS_HOOK(' hooks/hooks.def |
         sed -E 's/^TS_HOOK\(([A-Za-z]+), [^,]+, ([A-Za-z0-9_]+), .*, ([A-Z]+), ([A-Z]+)\)$/\1|\2|\3|\4/')
[ "$hooked" -gt 150 ] || { echo "FAIL: only $hooked hooked symbols parsed from hooks/hooks.def"; exit 1; }
# Twins: the header declares them (under their own names) only with
# CUDA_API_PER_THREAD_DEFAULT_STREAM.  __cudaLaunchKernel_ptsz is declared for
# C++ only (hooks/hooks.h repeats its declaration for C).
{ echo '#include <cuda.h>'; echo '#include <cuda_runtime_api.h>'
  grep '^TS_HOOK(' hooks/hooks.def | grep -v '^TS_HOOK([a-zA-Z]*, [^,]*, __' |
  sed -nE 's/^TS_HOOK\(([A-Za-z]+), ([^,]+), ([A-Za-z0-9_]+), (\(.*\)), (\([^()]*\)), (PTDS|PTSZ), [A-Z]+\)$/_Static_assert(__builtin_types_compatible_p(__typeof__(\&\3_\L\6\E), \2 (*)\4), "\3_\L\6\E: signature differs from the toolkit header");/p'
} > "$tmp/twins.c"
twins=$(grep -c _Static_assert "$tmp/twins.c")
[ "$twins" -gt 40 ] || { echo "FAIL: only $twins per-thread twins parsed from hooks/hooks.def"; exit 1; }
if ! ${CC:-gcc} -std=gnu11 -fsyntax-only -DCUDA_API_PER_THREAD_DEFAULT_STREAM -I"$CUDA_HOME/include" "$tmp/twins.c" 2> "$tmp/twins.err"; then
  echo "FAIL: per-thread twins disagree with the toolkit headers:"; grep error "$tmp/twins.err"; fail=1
fi
echo dlsym >> "$tmp/hooked"
# trainshim's own API (hooks/offload_api.c)
printf '%s\n' trainshim_pause trainshim_resume trainshim_tag >> "$tmp/hooked"
sort -u "$tmp/hooked" > "$tmp/want"
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > "$tmp/have"
if ! diff "$tmp/want" "$tmp/have" > "$tmp/diff"; then
  echo "FAIL: libtrainshim.so exports differ from hooks.def (< missing, > extra):"; cat "$tmp/diff"; fail=1
fi
[ $fail = 0 ] && echo "ok: $hooked hooked symbols exist in the toolkit, $twins twins match its headers, and they are exactly what libtrainshim.so exports"
exit $fail
