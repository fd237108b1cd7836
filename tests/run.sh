#!/usr/bin/env bash
# Runs every test: the binaries built from tests/**/test_*.{c,cu} (in $B/tests)
# and the scripts tests/**/test_*.sh, each with a time limit, on the emulator.
# Usage: tests/run.sh [substring-filter...]
# A test passes when it exits 0, and is skipped when it exits 77 (what it
# needs cannot be had here, e.g. PyPI for the torch suite: it says why in one
# "skipped:" line).  Ends with the line "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export B
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export EMU_JITTER_US=${EMU_JITTER_US:-50}
TIMEOUT=${TEST_TIMEOUT:-300}
logdir=$B/test-logs
mkdir -p "$logdir"
tests=()
while IFS= read -r t; do tests+=("$t"); done < <(
  { find "$B/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null
    find tests -name 'test_*.sh' -type f; } | sort)
pass=0 fail=0 skip=0 failed=()
for t in "${tests[@]}"; do
  if [ $# -gt 0 ]; then
    keep=0; for f in "$@"; do case $t in *"$f"*) keep=1;; esac; done
    [ $keep = 1 ] || continue
  fi
  name=${t#"$B/"}; log="$logdir/$(echo "$name" | tr '/' '_').log"
  start=$(date +%s.%N)
  if case $t in *.sh) timeout -k 5 "$TIMEOUT" bash "$t" ;; *) timeout -k 5 "$TIMEOUT" "$t" ;; esac >"$log" 2>&1 </dev/null; then
    rc=0; else rc=$?; fi
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
  if [ $rc = 0 ]; then pass=$((pass+1)); echo "PASS $name (${secs}s)"
  elif [ $rc = 77 ]; then skip=$((skip+1)); echo "SKIP $name (${secs}s): $(grep -m1 '^skipped:' "$log" || echo "exit 77")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (exit $rc, ${secs}s; log $log)"; tail -n 20 "$log" | sed 's/^/    /'; fi
done
[ ${#failed[@]} = 0 ] || { echo "failed:"; printf '  %s\n' "${failed[@]}"; }
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ] && [ $pass -gt 0 ]
