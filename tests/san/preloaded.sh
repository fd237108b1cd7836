#!/usr/bin/env bash
# Runs one test program with $B/libtrainshim.so preloaded, for the sanitizer
# runs (make san-test, B=<tree>/tsan or /asan): for programs whose own test
# script also runs a mode in which the program itself races, with or without
# the shim (the sanitizer would report the program, not trainshim).  Passes when the
# program exits 0 -- it checks its own results -- and the shim really was
# active (it wrote its log).
# Usage: B=<build dir> tests/san/preloaded.sh <program> [args...]
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
shim=$PWD/$B/libtrainshim.so
prog=$1; shift
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export EMU_JITTER_US=${EMU_JITTER_US:-50}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
name="$(basename "$prog")${*:+ $*}"
start=$(date +%s)
if ! TRAINSHIM_LOG="$tmp/log.%p" LD_PRELOAD="$shim" "$prog" "$@" > "$tmp/out" 2> "$tmp/err"; then
  echo "FAIL $name under $shim:"; tail -n 60 "$tmp/out" "$tmp/err"; exit 1
fi
if ! [ -s "$(ls "$tmp"/log.* 2>/dev/null | head -n 1)" ]; then
  echo "FAIL $name: no trainshim log, the shim was not active"; cat "$tmp/err"; exit 1
fi
echo "PASS $name under $B/libtrainshim.so ($(( $(date +%s) - start ))s)"
