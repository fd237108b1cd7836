#!/usr/bin/env bash
# The README's options table is exactly what `trainshim config --markdown`
# prints from shim/core/options.def (scripts/update-readme-options.sh regenerates it).
set -euo pipefail
B=${B:-build}
want=$("$B/trainshim" config --markdown)
have=$(sed -n '/<!-- options-table/,/<!-- end options-table -->/p' README.md | sed '1d;$d')
if [ "$want" != "$have" ]; then
  echo "README options table differs from 'trainshim config --markdown':"
  diff <(echo "$have") <(echo "$want") || true
  echo "run scripts/update-readme-options.sh"
  exit 1
fi
n=$(echo "$want" | grep -c '^| `TRAINSHIM_')
[ "$n" -ge 4 ] || { echo "only $n options in the table"; exit 1; }
echo "README options table matches ($n options)"
