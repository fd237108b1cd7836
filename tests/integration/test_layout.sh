#!/usr/bin/env bash
# scripts/check-layout.sh (run by `make test` before the suites) passes on
# this tree, and fails, naming file:line and the rule, on a copy of the tree
# with one violation of each rule planted in it.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/check-layout.sh >/dev/null || { bash scripts/check-layout.sh; echo "FAIL: the tree breaks its layout"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r shim hooks tools scripts .clang-format "$tmp"/
cd "$tmp"
# up: shim/ reaching the hook layer
echo '#include "hooks.h"' >>shim/log/clock.c
# door: across a folder's door, from hooks/ and from another shim folder
echo '#include "alloc/alloc_internal.h"' >>hooks/dl.c
echo '#include "log/stacks.h"' >>shim/copy/staging.c
# tools: a tool reaching past a door
echo '#include "devmem/devmem.c"' >>tools/cmd/main.c
# cycle: alloc -> devmem closes alloc <- devmem
echo '#include "devmem/devmem.h"' >>shim/alloc/alloc_block.c
# format: an unformatted product file
printf 'static int  badly_formatted (void){return 0;}\n' >>shim/core/msg.c
if out=$(bash scripts/check-layout.sh 2>&1); then
  echo "FAIL: check-layout.sh passed a tree with violations"; exit 1
fi
expect() {
  printf '%s\n' "$out" | grep -q -- "$1" || { echo "FAIL: no '$1' in:"; printf '%s\n' "$out"; exit 1; }
}
n() { wc -l <"$1" | tr -d ' '; }
expect "^shim/log/clock.c:$(n shim/log/clock.c): up: "
expect "^hooks/dl.c:$(n hooks/dl.c): door: shim/alloc/alloc_internal.h is not a door of shim/alloc"
expect "^shim/copy/staging.c:$(n shim/copy/staging.c): door: shim/log/stacks.h is not a door of shim/log"
expect "^tools/cmd/main.c:$(n tools/cmd/main.c): tools: shim/devmem/devmem.c is not a door of shim/devmem"
expect "^shim/alloc/alloc_block.c:$(n shim/alloc/alloc_block.c): cycle: shim/alloc -> shim/devmem"
expect "^shim/core/msg.c:[0-9]*: format: "
# a line for each planted violation at least (a cycle names each of its edges)
got=$(printf '%s\n' "$out" | grep -c ': \(up\|door\|tools\|cycle\|format\): ')
[ "$got" -ge 6 ] || { echo "FAIL: $got violations reported, want at least 6:"; printf '%s\n' "$out"; exit 1; }
echo "check-layout: passes the tree, catches up/door/tools/cycle/format"
