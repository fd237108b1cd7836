#!/usr/bin/env bash
# Checks the product code's layout (shim/, hooks/, tools/) and prints each
# violation as file:line: rule.  Exit 1 if any.
#   format   a .c/.h file clang-format (the repo's .clang-format) would change
#   up       a shim/ file including the hook layer (hooks/)
#   door     a file including another shim folder's header that is not one of
#            that folder's doors (the "Doors:" line of shim/<folder>/README.md;
#            a .def beside a door header is part of that door)
#   tools    the same for tools/: shim headers only through the doors
#   cycle    folders including each other in a circle
# Usage: scripts/check-layout.sh [--no-format]
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
if [ "${1:-}" != --no-format ]; then
  CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
  if ! command -v "$CLANG_FORMAT" >/dev/null; then
    echo "check-layout: error: $CLANG_FORMAT not found (bash scripts/setup.sh installs it)" >&2
    exit 1
  fi
  # one clang-format run over all files; its "file:line:col: error:" reports
  # name each file it would change, the first such line of each is printed
  mapfile -t files < <(find shim hooks tools -name '*.[ch]' | sort)
  report=$("$CLANG_FORMAT" --dry-run -Werror "${files[@]}" 2>&1 >/dev/null) || true
  bad=$(printf '%s\n' "$report" | sed -n 's/^\([^:]*\):\([0-9]*\):[0-9]*: error:.*/\1:\2/p' | awk -F: '!seen[$1]++')
  if [ -n "$bad" ]; then
    printf '%s\n' "$bad" | sed 's/$/: format: clang-format would change this file (make format)/'
    fail=1
  fi
fi
python3 - <<'PY' || fail=1
import os, re, sys

FOLDER_RE = re.compile(r'^(shim/[^/]+|hooks|tools/[^/]+)/')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

def folder(path):
    m = FOLDER_RE.match(path)
    return m.group(1) if m else None

# Doors of each shim folder, from its README's "Doors:" line.
doors = {}
for name in sorted(os.listdir('shim')):
    d = 'shim/' + name
    if not os.path.isdir(d):
        continue
    readme = d + '/README.md'
    found = None
    if os.path.exists(readme):
        for line in open(readme, encoding='utf-8'):
            if line.startswith('Doors:'):
                found = line.split(':', 1)[1].split()
    doors[d] = set(found or [])
    if found is None:
        print(f'{readme}:1: door: shim/{name} declares no "Doors:" line')

def is_door(target):
    f = folder(target)
    base = os.path.basename(target)
    stem, ext = os.path.splitext(base)
    ds = doors.get(f, set())
    return base in ds or (ext == '.def' and stem + '.h' in ds)

def resolve(src, inc):
    """The repo file an #include "inc" of src names: beside src first, then
    the include roots (-Ishim, -Itools; hooks/ to catch an up-pointing one)."""
    for base in (os.path.dirname(src), 'shim', 'tools', 'hooks', '.'):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(cand):
            return cand
    return None

files = []
for top in ('shim', 'hooks', 'tools'):
    for root, _, names in os.walk(top):
        files += [os.path.join(root, n) for n in names if n.endswith(('.c', '.h', '.def'))]

bad = 0
edges = {}  # folder -> {folder: (file, line)}
for src in sorted(files):
    sf = folder(src)
    for no, line in enumerate(open(src, encoding='utf-8', errors='replace'), 1):
        m = INCLUDE_RE.match(line)
        if not m:
            continue
        target = resolve(src, m.group(1))
        if target is None:
            continue
        tf = folder(target)
        if tf is None or tf == sf:
            continue
        edges.setdefault(sf, {}).setdefault(tf, (src, no))
        if src.startswith('shim/') and tf == 'hooks':
            print(f'{src}:{no}: up: shim/ includes the hook layer ({target})')
            bad += 1
        elif tf.startswith('shim/') and not is_door(target):
            rule = 'tools' if src.startswith('tools/') else 'door'
            print(f'{src}:{no}: {rule}: {target} is not a door of {tf} '
                  f'(doors: {" ".join(sorted(doors.get(tf, []))) or "none"})')
            bad += 1

# Cycles between folders: Tarjan's strongly connected components.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in edges.get(v, {}):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))
nodes = set(edges) | {t for ts in edges.values() for t in ts}
for v in sorted(nodes):
    if v not in index:
        visit(v)
for comp in sccs:
    for a in comp:
        for b, (src, no) in sorted(edges.get(a, {}).items()):
            if b in comp:
                print(f'{src}:{no}: cycle: {a} -> {b} closes a cycle among {", ".join(comp)}')
                bad += 1
sys.exit(1 if bad else 0)
PY
if [ "$fail" = 0 ]; then echo "check-layout: ok"; fi
exit "$fail"
