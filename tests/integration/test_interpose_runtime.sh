#!/usr/bin/env bash
# test_interpose_runtime (a runtime program linked against the real
# libcudart.so) under LD_PRELOAD=libtrainshim.so: output identical to the run
# without the shim (under EMU_JITTER_US, two seeds), and the hooks saw what
# the program did: runtime calls as outermost, the driver calls the emulated
# runtime makes through cuGetProcAddress as nested, _ptds/_ptsz twins.
set -u
B=${B:-build}
prog=$B/tests/integration/test_interpose_runtime
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The device allocator would serve cudaMalloc itself, so the runtime would
# never reach cuMemAlloc_v2: this test is about interposition, so it runs
# with the allocator off (the allocator has its own differential tests).
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log" TRAINSHIM_ALLOC=off
fail=0
THREADS=4 ROUNDS=50   # as in test_interpose_runtime.c
for seed in 1 7; do
  EMU_SEED=$seed "$prog" > "$tmp/plain.$seed" 2> "$tmp/plain.$seed.err" || { echo "FAIL: plain run (seed $seed) failed:"; cat "$tmp/plain.$seed" "$tmp/plain.$seed.err"; exit 1; }
  EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_DEBUG_COUNTS="$tmp/counts.$seed" "$prog" > "$tmp/shim.$seed" 2> "$tmp/shim.$seed.err" \
    || { echo "FAIL: run under the shim (seed $seed) failed:"; cat "$tmp/shim.$seed" "$tmp/shim.$seed.err"; exit 1; }
  diff "$tmp/plain.$seed" "$tmp/shim.$seed" > /dev/null || { echo "FAIL: output differs under the shim (seed $seed):"; diff "$tmp/plain.$seed" "$tmp/shim.$seed"; fail=1; }
done
# TRAINSHIM=0: pure passthrough, nothing counted, same output.
LD_PRELOAD="$shim" TRAINSHIM=0 TRAINSHIM_DEBUG_COUNTS="$tmp/counts.off" "$prog" > "$tmp/off" 2> "$tmp/off.err" \
  || { echo "FAIL: run under TRAINSHIM=0 failed:"; cat "$tmp/off" "$tmp/off.err"; exit 1; }
diff "$tmp/plain.1" "$tmp/off" > /dev/null || { echo "FAIL: output differs under TRAINSHIM=0:"; diff "$tmp/plain.1" "$tmp/off"; fail=1; }
[ ! -e "$tmp/counts.off" ] || { echo "FAIL: hooks counted calls under TRAINSHIM=0:"; cat "$tmp/counts.off"; fail=1; }
counts=$tmp/counts.1
[ -s "$counts" ] || { echo "FAIL: the shim wrote no TRAINSHIM_DEBUG_COUNTS file"; exit 1; }
outer()  { awk -v n="$1" '$1 == n { v = $2 } END { print v + 0 }' "$counts"; }
nested() { awk -v n="$1" '$1 == n { v = $3 } END { print v + 0 }' "$counts"; }
expect() {  # expect <what> <symbol> <op> <value>
  local got; got=$($1 "$2")
  if ! [ "$got" "$3" "$4" ]; then echo "FAIL: $1 calls of $2 = $got, want $3 $4"; fail=1; fi
}
expect outer  cudaMalloc -eq $((3 + THREADS * ROUNDS))
expect nested cudaMalloc -eq 0
expect outer  cudaFree -eq $((4 + THREADS * ROUNDS))
expect outer  cudaMemcpy -eq $((3 + 2 * THREADS * ROUNDS))
expect outer  cudaMemcpy_ptds -eq 1
expect outer  cudaMemcpyAsync -eq 4
expect outer  cudaMemcpyAsync_ptsz -eq 1
expect outer  cudaMemcpy2D -eq 2
expect outer  cudaMallocAsync -eq 1
expect outer  cudaFreeAsync -eq 1
expect outer  cudaMallocHost -eq 1
expect outer  cudaFreeHost -eq 1
expect outer  cudaSetDevice -eq $((1 + THREADS))
# The emulated runtime reaches the driver through cuGetProcAddress, as the
# real one does: those calls are seen, and only as nested ones.
expect outer  cuMemAlloc_v2 -eq 0
expect nested cuMemAlloc_v2 -ge 2
expect outer  cuMemFree_v2 -eq 0
expect nested cuMemFree_v2 -ge 2
[ $fail = 0 ] && echo "ok: identical output with and without the shim; hook counts as expected"
exit $fail
