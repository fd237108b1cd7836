#!/usr/bin/env bash
# Pinned host allocation cache, differential: test_copy_hostcache (which
# checks its own results: no reuse under a queued copy, flags, errors) prints
# the same with and without LD_PRELOAD=libtrainshim.so, with slow emulated
# copies (EMU_PINNED_GBPS=2) so that a block reused under a queued copy would
# show (two devices: a block freed while device 0 is current must wait for
# device 1's queued copy); with the shim the emulator sees fewer real pinned allocations (the
# cache served them), with TRAINSHIM_HOST_CACHE=off (and no staging ring:
# TRAINSHIM_PINNED_COPY=off) the same number.
set -u
B=${B:-build}
prog=$B/tests/integration/test_copy_hostcache
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} EMU_PINNED_GBPS=2 EMU_DEVICES=2 TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
run() {
  local name=$1; shift
  env "$@" "$prog" > "$tmp/$name" 2> "$tmp/$name.err" || { echo "FAIL: run $name ($*) failed:"; cat "$tmp/$name" "$tmp/$name.err"; fail=1; }
  awk '/^real pinned allocations:/ { print $4 }' "$tmp/$name.err"
}
plain=$(run plain EMU_SEED=1)
on=$(run on EMU_SEED=2 LD_PRELOAD="$shim")
off=$(run off EMU_SEED=3 LD_PRELOAD="$shim" TRAINSHIM_HOST_CACHE=off TRAINSHIM_PINNED_COPY=off)
for n in on off; do
  diff "$tmp/plain" "$tmp/$n" > /dev/null || { echo "FAIL: output differs ($n):"; diff "$tmp/plain" "$tmp/$n"; fail=1; }
done
[ -n "$plain" ] && [ -n "$on" ] && [ "$on" -lt "$plain" ] || { echo "FAIL: real pinned allocations with the cache $on, without the shim $plain: want fewer"; fail=1; }
[ "$off" = "$plain" ] || { echo "FAIL: real pinned allocations with TRAINSHIM_HOST_CACHE=off $off, without the shim $plain: want equal"; fail=1; }
[ $fail = 0 ] && echo "ok: identical output; real pinned allocations $plain without the shim, $on with the cache"
exit $fail
