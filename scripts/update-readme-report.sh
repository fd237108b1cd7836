#!/usr/bin/env bash
# Regenerates the sample report in README.md (between the sample-report
# markers) from `make demo`'s two-rank run.  To keep the README readable,
# rank 1's own sections (which repeat rank 0's) become one line and the
# allocation sites stop after the first three.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
out=$(B=$B bash scripts/demo.sh 2>&1)
report=$(printf '%s\n' "$out" | awk '/^== RANKS ==$/ { on = 1 } on' |
  awk '/^== RANK 1 ==$/ { print; print "(the same sections for rank 1)"; skip = 1; next }
       skip && /^== RANKS: / { skip = 0; print "" }
       !skip' |
  awk '/^#4 / && sites { print "(more sites)"; print ""; cut = 1 } /^== / { sites = /TOP ALLOCATION SITES/; cut = 0 }
       !cut' | sed 's/^/    /; s/^    $//')
[ -n "$report" ] || { echo "update-readme-report: the demo printed no report" >&2; exit 1; }
python3 - "$report" <<'PY'
import sys
report = sys.argv[1]
readme = open("README.md").read()
a = readme.index("<!-- sample-report -->")
b = readme.index("<!-- end sample-report -->")
readme = readme[:a] + "<!-- sample-report -->\n\n" + report.rstrip() + "\n\n" + readme[b:]
open("README.md", "w").write(readme)
PY
echo "README.md: sample report regenerated"
