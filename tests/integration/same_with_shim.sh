# Sourced by the tests/integration scripts that run one program without the
# shim and under it and demand the same stdout:
#   same_with_shim NAME SEED...
# runs $B/tests/integration/NAME once without the shim (EMU_SEED=1), then
# under the pool in the expandable and caching modes for each SEED, with the
# caller's environment (EMU_DEVICES, EMU_JITTER_US...).  Fails on a failed
# run, a different stdout, or any trainshim message on stderr (a fallback to
# passthrough would pass the comparison).  Prints the plain output when all
# agree; returns 0/1.
same_with_shim() {
  local name=$1; shift
  local prog=$B/tests/integration/$name shim=$PWD/$B/libtrainshim.so
  local f tmp fail=0 seed mode out
  for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; return 1; }; done
  tmp=$(mktemp -d)
  TRAINSHIM_LOG="$tmp/trainshim.%p.log"
  export TRAINSHIM_LOG
  if ! EMU_SEED=1 "$prog" > "$tmp/plain" 2> "$tmp/plain.err"; then
    echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; rm -rf "$tmp"; return 1
  fi
  for seed in "$@"; do
    for mode in expandable caching; do
      out=$tmp/$mode.$seed
      EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=$mode "$prog" > "$out" 2> "$out.err" \
        || { echo "FAIL: $mode run (seed $seed):"; cat "$out" "$out.err"; fail=1; continue; }
      diff "$tmp/plain" "$out" > /dev/null || { echo "FAIL: $mode (seed $seed) differs:"; diff "$tmp/plain" "$out"; fail=1; }
      if grep -q "trainshim" "$out.err"; then echo "FAIL: $mode (seed $seed) stderr:"; cat "$out.err"; fail=1; fi
    done
  done
  [ $fail = 0 ] && echo "$name: same output without and under the shim: $(tr '\n' ' ' < "$tmp/plain")"
  rm -rf "$tmp"
  return $fail
}
