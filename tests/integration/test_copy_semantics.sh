#!/usr/bin/env bash
# Pinned copy engine, differential: test_copy_semantics (which checks its own
# results) prints the same thing with and without LD_PRELOAD=libtrainshim.so,
# under emulator jitter and several seeds, with the default ring, with tiny
# chunks and a ring smaller than one copy (buffers reused after their event),
# and with no ring at all (fallback to the original call).  Then the
# emulator's byte counters: with conversion on, no pageable byte above the
# threshold reaches the driver; with it off, or when staging memory cannot be
# allocated, they all do (so the check can fail).
set -u
B=${B:-build}
prog=$B/tests/integration/test_copy_semantics
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0

run() {  # run <name> <env...>: runs the program, output in $tmp/<name>
  local name=$1; shift
  if ! env "$@" "$prog" > "$tmp/$name" 2> "$tmp/$name.err"; then
    echo "FAIL: run $name ($*) failed:"; cat "$tmp/$name" "$tmp/$name.err"; fail=1
  fi
}
same() {  # same <a> <b>
  diff "$tmp/$1" "$tmp/$2" > /dev/null || { echo "FAIL: output of $2 differs from $1:"; diff "$tmp/$1" "$tmp/$2"; fail=1; }
}

run plain.1 EMU_SEED=1
run shim.7 EMU_SEED=7 LD_PRELOAD="$shim"
run shim.99 EMU_SEED=99 EMU_JITTER_US=200 LD_PRELOAD="$shim"
same plain.1 shim.7; same plain.1 shim.99
# Tiny chunks, a ring of 4 of them: every copy waits for its own earlier chunks.
run small EMU_SEED=3 LD_PRELOAD="$shim" TRAINSHIM_COPY_CHUNK=64KiB TRAINSHIM_STAGING_BYTES=256KiB TRAINSHIM_COPY_THREADS=0
same plain.1 small
# 1 MiB pieces (the plan ramps 256 KiB -> 1 MiB -> 256 KiB inside the test's
# 2-6 MiB copies) and a ring of three: threads copying at once share it, so
# some copies hold fewer buffers than they want or fall back part way.
run ramp EMU_SEED=11 LD_PRELOAD="$shim" TRAINSHIM_COPY_CHUNK=1MiB TRAINSHIM_STAGING_BYTES=3MiB TRAINSHIM_COPY_THREADS=2
same plain.1 ramp
# No ring at all: every copy falls back to the original call.
run noring EMU_SEED=5 LD_PRELOAD="$shim" TRAINSHIM_STAGING_BYTES=0
same plain.1 noring

counters() {  # counters <name> <env...>: "total h2d.pageable h2d.pinned d2h.pageable d2h.pinned"
  local name=$1; shift
  env "$@" "$prog" counters > "$tmp/$name.out" 2> "$tmp/$name.err" || { echo "FAIL: counters run $name failed:"; cat "$tmp/$name.out" "$tmp/$name.err"; fail=1; }
  awk '/^total/ { print $2, $4, $6, $8, $10 }' "$tmp/$name.err"
}
read -r total hpg hpn dpg dpn <<< "$(counters on LD_PRELOAD="$shim")"
if [ -z "$total" ] || [ "$total" -le 0 ] || [ "$hpg" != 0 ] || [ "$dpg" != 0 ] || [ "$hpn" -lt "$total" ] || [ "$dpn" -lt "$total" ]; then
  echo "FAIL: with conversion on, want no pageable bytes and >= $total pinned each way; got h2d pageable=$hpg pinned=$hpn, d2h pageable=$dpg pinned=$dpn"; fail=1
fi
read -r total hpg hpn dpg dpn <<< "$(counters off LD_PRELOAD="$shim" TRAINSHIM_PINNED_COPY=off)"
if [ "$hpg" != "$total" ] || [ "$dpg" != "$total" ]; then
  echo "FAIL: with TRAINSHIM_PINNED_COPY=off, want $total pageable bytes each way; got h2d $hpg, d2h $dpg"; fail=1
fi
read -r total hpg hpn dpg dpn <<< "$(counters nomem LD_PRELOAD="$shim" EMU_FAIL=cuMemHostAlloc:1:CUDA_ERROR_OUT_OF_MEMORY)"
if [ "$hpg" != "$total" ] || [ "$dpg" != "$total" ]; then
  echo "FAIL: without staging memory, want the original $total pageable bytes each way; got h2d $hpg, d2h $dpg"; fail=1
fi
# Threshold: with the minimum raised above every size, nothing is converted.
read -r total hpg hpn dpg dpn <<< "$(counters high LD_PRELOAD="$shim" TRAINSHIM_PINNED_COPY_MIN=1GiB)"
if [ "$hpg" != "$total" ]; then
  echo "FAIL: with TRAINSHIM_PINNED_COPY_MIN=1GiB, want $total pageable H2D bytes; got $hpg"; fail=1
fi
[ $fail = 0 ] && echo "ok: identical output with and without the shim (5 configurations); no pageable byte above the threshold reached the driver"
exit $fail
