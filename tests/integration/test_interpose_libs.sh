#!/usr/bin/env bash
# test_interpose_libs (cuBLAS + NCCL) under LD_PRELOAD=libtrainshim.so:
# identical output with and without the shim (two seeds), and outermost-call
# accounting across libraries that call each other.
set -u
B=${B:-build}
prog=$B/tests/integration/test_interpose_libs
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
fail=0
for seed in 3 11; do
  EMU_SEED=$seed "$prog" > "$tmp/plain" 2> "$tmp/plain.err" || { echo "FAIL: plain run failed:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
  EMU_SEED=$seed LD_PRELOAD="$shim" TRAINSHIM_DEBUG_COUNTS="$tmp/counts" "$prog" > "$tmp/shim" 2> "$tmp/shim.err" \
    || { echo "FAIL: run under the shim failed:"; cat "$tmp/shim" "$tmp/shim.err"; exit 1; }
  diff "$tmp/plain" "$tmp/shim" > /dev/null || { echo "FAIL: output differs under the shim (seed $seed):"; diff "$tmp/plain" "$tmp/shim"; fail=1; }
done
counts=$tmp/counts
[ -s "$counts" ] || { echo "FAIL: no TRAINSHIM_DEBUG_COUNTS file"; exit 1; }
get() { awk -v n="$2" -v c="$1" '$1 == n { v = $c } END { print v + 0 }' "$counts"; }
expect() {  # expect outer|nested <symbol> <op> <value>
  local col=2; [ "$1" = nested ] && col=3
  local got; got=$(get $col "$2")
  if ! [ "$got" "$3" "$4" ]; then echo "FAIL: $1 calls of $2 = $got, want $3 $4"; fail=1; fi
}
expect outer  cublasSgemm_v2 -eq 2
expect outer  cublasLtMatmul -eq 0          # cuBLAS's own call into cuBLASLt
expect nested cublasLtMatmul -ge 1
expect outer  cuMemAlloc_v2 -ge 1           # cublasCreate's workspace: cublasCreate is not hooked
expect outer  ncclBcast -eq 1
expect outer  ncclBroadcast -eq 0           # ncclBcast's own call counts once, as ncclBcast
expect nested ncclBroadcast -eq 1
expect outer  ncclAllReduce -eq 1
expect outer  ncclGroupStart -eq 1
expect outer  ncclGroupEnd -eq 1
expect outer  ncclCommInitAll -eq 1
expect outer  ncclCommDestroy -eq 1
[ $fail = 0 ] && echo "ok: identical output; cuBLAS/cuBLASLt and NCCL calls counted once, at the outermost call"
exit $fail
