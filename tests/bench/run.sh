#!/usr/bin/env bash
# make bench: runs every benchmark (build/bench/bench_*) on the emulator.
# Each prints its figures beside a baseline measured in the same run.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export EMU_JITTER_US=0
status=0
for b in "$B"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || { echo "benchmark $b failed" >&2; status=1; }
  echo
done
for s in tests/bench/bench_*.sh; do
  [ -f "$s" ] || continue
  echo "== $(basename "$s")"
  B=$B bash "$s" || { echo "benchmark $s failed" >&2; status=1; }
  echo
done
exit $status
