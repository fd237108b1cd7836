#!/usr/bin/env bash
# The differential error-state suite: test_error_state's misuse cases (return
# code, cudaPeekAtLastError, cudaGetLastError) must print the same lines
# without the shim and with it, in each allocator mode and with the copy
# engine and host cache on or off, under emulator jitter.  Then the memory
# limit: the process's very first cudaMalloc, above TRAINSHIM_MEMORY_LIMIT,
# fails with cudaErrorMemoryAllocation and sets the last error, and the OOM
# report names the limit.
set -u
B=${B:-build}
prog=$B/tests/integration/test_error_state
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export TRAINSHIM_LOG="$tmp/trainshim.%p.log" EMU_JITTER_US=${EMU_JITTER_US:-50}
fail=0
"$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
n=$(wc -l < "$tmp/plain")
[ "$n" -ge 40 ] || { echo "FAIL: only $n case lines"; cat "$tmp/plain"; exit 1; }
grep -q '^freehost_double *rc=1 peek=1 last=1' "$tmp/plain" || { echo "FAIL: plain double cudaFreeHost:"; cat "$tmp/plain"; exit 1; }
i=0
for conf in "" TRAINSHIM_ALLOC=caching TRAINSHIM_ALLOC=off "TRAINSHIM_PINNED_COPY=off TRAINSHIM_HOST_CACHE=off" \
            "TRAINSHIM_PINNED_COPY_MIN=4KiB TRAINSHIM_COPY_CHUNK=64KiB"; do
  for seed in 1 2; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    env $conf EMU_SEED=$seed LD_PRELOAD="$shim" "$prog" > "$tmp/s$i" 2> "$tmp/s$i.err" \
      || { echo "FAIL: shim run '$conf' seed $seed exited:"; cat "$tmp/s$i" "$tmp/s$i.err"; fail=1; continue; }
    diff "$tmp/plain" "$tmp/s$i" > "$tmp/d$i" || { echo "FAIL: error state differs under the shim ('$conf', seed $seed):"; cat "$tmp/d$i"; fail=1; }
  done
done
# the memory limit covers the first allocation of the process
"$prog" limit > "$tmp/lim.plain" 2>&1
grep -q '^limit_first_100MiB *rc=0 ' "$tmp/lim.plain" || { echo "FAIL: plain 100 MiB:"; cat "$tmp/lim.plain"; fail=1; }
TRAINSHIM_MEMORY_LIMIT=64MiB LD_PRELOAD="$shim" "$prog" limit > "$tmp/lim" 2> "$tmp/lim.err"
grep -q '^limit_first_100MiB *rc=2 peek=2 last=2 after=0' "$tmp/lim" || { echo "FAIL: the first allocation escaped the limit:"; cat "$tmp/lim" "$tmp/lim.err"; fail=1; }
grep -q '^limit_then_16MiB *rc=0 ' "$tmp/lim" || { echo "FAIL: an allocation under the limit failed:"; cat "$tmp/lim"; fail=1; }
grep -q 'TRAINSHIM_MEMORY_LIMIT caps the pool at 67108864 bytes' "$tmp/lim.err" || { echo "FAIL: the OOM report does not name the limit:"; cat "$tmp/lim.err"; fail=1; }
[ $fail = 0 ] && echo "error state ok ($n cases, $i shim runs)"
exit $fail
