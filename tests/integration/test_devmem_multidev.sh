#!/usr/bin/env bash
# test_devmem_multidev on two emulated devices, one thread driving both:
# allocations on the stream's device whichever is current, frees ordered on
# the other device's stream, synchronous frees from the other device.  Same
# output without the shim and under the pool (expandable and caching), under
# emulator delays, and no passthrough fallback.
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_multidev
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-200} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
EMU_SEED=1 "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
for seed in 1 7; do
  for mode in expandable caching; do
    out=$tmp/$mode.$seed
    EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode "$prog" > "$out" 2> "$out.err" \
      || { echo "FAIL: $mode run (seed $seed):"; cat "$out" "$out.err"; fail=1; continue; }
    diff "$tmp/plain" "$out" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$out"; fail=1; }
    if grep -q "trainshim" "$out.err"; then echo "FAIL: $mode (seed $seed) stderr:"; cat "$out.err"; fail=1; fi
  done
done
[ $fail = 0 ] && echo "devmem multidev ok: $(tr '\n' ' ' < "$tmp/plain")"
exit $fail
