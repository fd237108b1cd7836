#!/usr/bin/env bash
# Regenerates the README's options table from the one option table
# (shim/core/options.def, printed by `trainshim config --markdown`).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
table=$("$B/trainshim" config --markdown)
python3 - "$table" <<'PY'
import sys, re
table = sys.argv[1]
s = open('README.md').read()
start = s.index('<!-- options-table')
start = s.index('\n', start) + 1
end = s.index('<!-- end options-table -->')
open('README.md', 'w').write(s[:start] + table + '\n' + s[end:])
PY
