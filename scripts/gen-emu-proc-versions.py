#!/usr/bin/env python3
"""Generates the emulated driver's cuGetProcAddress version table.

Usage: scripts/gen-emu-proc-versions.py [CUDA_HOME] > tests/emu/common/proc_versions.c

cuGetProcAddress(symbol, pfn, cudaVersion, flags) takes a *base* name and the
CUDA version the caller was built for, and returns the variant that was the
default at that version.  The toolkit records those versions in
include/cudaTypedefs.h: PFN_<base>_v<version>[_ptds|_ptsz] is the type of
what the call answers for <base> at <version> (CUDA programming guide, "Driver
Entry Point Access": the first version of a symbol has no suffix, each later
one the next _vN).  So, per base name:
  - the legacy typedef versions, ascending, map to the exports
    <base>, <base>_v2, <base>_v3, ... (tests/emu/symbols/cuda.txt);
  - a _ptds/_ptsz typedef at version V maps to the per-thread form of the
    legacy export current at V (cuMemcpyHtoD_v7000_ptds -> cuMemcpyHtoD_v2_ptds).
A _vN that cuda.h does not map its base name to (cuCtxSynchronize_v2,
cuCtxGetDevice_v2, cuStreamGetCtx_v2: new APIs under a _v2 name, with other
arguments) is its own base: asked for by its full name, as NVIDIA's
cuda-python bindings do, while the base name keeps answering the variant
cuda.h maps it to.  Exports no typedef describes (cuGetExportTable, ...) get version 0 (always
available).  Renames the header does with #define rather than with a new
_vN are listed in RENAMES.  Bases whose typedef and export counts disagree
are reported on stderr and mapped from the newest end (the oldest versions
are the ones the toolkit stopped exporting).
"""
import os
import re
import sys
from collections import defaultdict

cuda_home = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda"
here = os.path.dirname(os.path.abspath(__file__))
symbols_path = os.path.join(here, "..", "tests", "emu", "symbols", "cuda.txt")
typedefs_path = os.path.join(cuda_home, "include", "cudaTypedefs.h")
cuda_h_path = os.path.join(cuda_home, "include", "cuda.h")

# cuda.h: "#define cuGraphInstantiate cuGraphInstantiateWithFlags" (CUDA 12.0):
# from 12000 on, the base name answers the renamed entry point.
RENAMES = [("cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags")]

exports = [l.strip() for l in open(symbols_path) if l.strip()]
export_set = set(exports)

typedef_re = re.compile(r"\bPFN_(cu[A-Za-z0-9]+?)_v(\d{4,6})(_ptds|_ptsz)?\)")
legacy = defaultdict(set)   # base -> versions
per_thread = defaultdict(set)   # base -> {(version, suffix)}
for line in open(typedefs_path):
    for base, ver, pt in typedef_re.findall(line):
        if pt:
            per_thread[base].add((int(ver), pt))
        else:
            legacy[base].add(int(ver))

suffix_re = re.compile(r"^(.*?)(?:_v(\d+))?(_ptds|_ptsz)?$")
variants = defaultdict(list)   # base -> [(n, name)] legacy exports, n = 1 for the bare name
for name in exports:
    m = suffix_re.match(name)
    base, n, pt = m.group(1), m.group(2), m.group(3)
    if pt:
        continue
    variants[base].append((int(n) if n else 1, name))

# cuda.h: "#define cuMemAlloc cuMemAlloc_v2", "#define cuStreamQuery __CUDA_API_PTSZ(cuStreamQuery)"
define_re = re.compile(r"#define\s+(cu\w+)\s+(?:__CUDA_API_PT(?:DS|SZ)\()?(cu\w+?)\)?\s*$", re.M)
header_maps = {}
for a, b in define_re.findall(open(cuda_h_path).read()):
    header_maps.setdefault(a, b)

rows = []          # (base, version, export, per_thread)


def add_per_thread(base, current):
    """Per-thread forms of the legacy variants in current [(version, name)]."""
    for v, pt in sorted(per_thread.get(base, ())):
        legacy_at = [nm for lv, nm in current if lv <= v]
        if not legacy_at:
            continue
        cand = legacy_at[-1] + pt
        if cand in export_set:
            rows.append((base, v, cand, 1))
            covered.add(cand)

covered = set()
for base in sorted(set(legacy) | set(variants)):
    vers = sorted(legacy.get(base, ()))
    names = [nm for _, nm in sorted(variants.get(base, ()))]
    if not names:
        continue          # a typedef for something this toolkit no longer exports
    if not vers:
        continue          # handled below as version 0
    if len(vers) != len(names):
        print(f"gen-emu-proc-versions: {base}: {len(vers)} typedef versions, "
              f"{len(names)} exports; mapping from the newest", file=sys.stderr)
        k = min(len(vers), len(names))
        vers, names = vers[-k:], names[-k:]
    current = list(zip(vers, names))
    target = header_maps.get(base, base)
    cut = [i for i, (_, nm) in enumerate(current) if nm == target]
    separate = current[cut[0] + 1:] if cut else []
    current = current[:cut[0] + 1] if cut else current
    for v, nm in current:
        rows.append((base, v, nm, 0))
        covered.add(nm)
    add_per_thread(base, current)
    for v, nm in separate:
        rows.append((nm, v, nm, 0))
        covered.add(nm)
        for pv, pt in sorted(per_thread.get(base, ())):
            if pv >= v and nm + pt in export_set and nm + pt not in covered:
                rows.append((nm, pv, nm + pt, 1))
                covered.add(nm + pt)

for base, v, target in RENAMES:
    if target in export_set:
        rows.append((base, v, target, 0))

# Every other export (no typedef dates it: cuGetExportTable, a _vN or _ptsz
# form left over by a count mismatch) answers its own name at any version.
for name in exports:
    if name in covered:
        continue
    rows.append((name, 0, name, 0))

rows = sorted(set(rows), key=lambda r: (r[0], r[3], r[1], r[2]))
print("/* generated by scripts/gen-emu-proc-versions.py from cudaTypedefs.h and")
print(" * tests/emu/symbols/cuda.txt: do not edit.  Which export cuGetProcAddress")
print(" * answers for a base name at a CUDA version (see proc_version.h). */")
print('#include "proc_version.h"')
print()
print("const struct emu_proc_version emu_proc_versions[] = {")
for base, v, nm, pt in rows:
    print(f'    {{"{base}", {v}, "{nm}", {pt}}},')
print("    {NULL, 0, NULL, 0}")
print("};")
print(f"const unsigned emu_proc_versions_count = {len(rows)};")
