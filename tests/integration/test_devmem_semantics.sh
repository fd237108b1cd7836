#!/usr/bin/env bash
# test_devmem_semantics under trainshim's device allocator: the program's
# output (error codes of edge cases, data checksums after allocation churn,
# pointer attributes, cudaMemGetInfo honesty) is identical without the shim,
# with TRAINSHIM_ALLOC=expandable (default) and caching, under emulator jitter
# and two seeds; TRAINSHIM_ALLOC=off is pure passthrough (every cudaMalloc
# reaches the driver).  The program itself checks, through the emulator's
# counters, which allocator served it.  One OOM report per failed
# allocation, except one asked again at once with nothing allocated or freed
# between (the same situation).
set -u
B=${B:-build}
prog=$B/tests/integration/test_devmem_semantics
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
run() {  # run <name> <program mode> [env...]
  local name=$1 mode=$2; shift 2
  env "$@" "$prog" "$mode" > "$tmp/$name.out" 2> "$tmp/$name.err" \
    || { echo "FAIL: run $name failed:"; cat "$tmp/$name.out" "$tmp/$name.err"; fail=1; return; }
  [ "$name" = plain.1 ] && return
  diff "$tmp/plain.1.out" "$tmp/$name.out" > /dev/null \
    || { echo "FAIL: output of $name differs from the plain run:"; diff "$tmp/plain.1.out" "$tmp/$name.out"; fail=1; }
}
run plain.1 plain EMU_SEED=1
for seed in 1 7; do
  run expandable.$seed pool EMU_SEED=$seed LD_PRELOAD="$shim"
  run caching.$seed caching EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_ALLOC=caching
done
run off plain LD_PRELOAD="$shim" TRAINSHIM_ALLOC=off
run disabled plain LD_PRELOAD="$shim" TRAINSHIM=0
# three refusals, the second at once after the first (the same situation,
# reported once), the third after other work
n=$(grep -c "trainshim: out of memory on device 0: requested 1125899906842624 bytes" "$tmp/expandable.1.err")
[ "$n" = 2 ] || { echo "FAIL: want two OOM reports, got $n:"; cat "$tmp/expandable.1.err"; fail=1; }
if grep -q "out of memory" "$tmp/off.err" "$tmp/disabled.err"; then echo "FAIL: OOM report without the pool"; fail=1; fi
[ $fail = 0 ] && echo "devmem semantics ok: $(head -c 300 "$tmp/expandable.1.err" | tr '\n' ' ')"
exit $fail
