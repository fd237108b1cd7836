#!/usr/bin/env bash
# The log reader's fuzzer (make fuzz) builds and runs its seed corpus plus a
# few seconds of mutation without a crash, so the harness cannot rot between
# the long fuzzing runs.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
out=$(bash tests/fuzz/run.sh 5 2>&1)
rc=$?
if [ $rc != 0 ]; then
  echo "$out" | tail -30
  echo "FAIL: tests/fuzz/run.sh exited $rc"
  exit 1
fi
echo "$out" | grep -q "number_of_executed_units" || { echo "$out" | tail -20; echo "FAIL: the fuzzer did not run"; exit 1; }
echo "$out" | grep "number_of_executed_units"
echo ok
