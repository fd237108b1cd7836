#!/usr/bin/env bash
# DDP on two ranks started by torch.multiprocessing.spawn with a tcp://
# rendezvous (tests/torch/case_ddp.py spawn), as DDP tutorials write it: no
# launcher sets WORLD_SIZE, so the shim knows the ranks only as Python
# multiprocessing workers.  It leaves torch's allocator alone there: under
# cudaMallocAsync torch's NCCL process group aborts each rank at teardown
# (its allocator hook asks for a snapshot).  By default (no
# TRAINSHIM_TORCH_BACKEND, no PYTORCH_CUDA_ALLOC_CONF) the job completes with
# output identical to the run without the shim, both ranks on torch's native
# allocator, and each rank's report says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
need_torch_nccl
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/plain.d" "$tmp/shim.d"
envs=(EMU_DEVICES=2 EMU_UNKNOWN_KERNELS=skip EMU_JITTER_US=${EMU_JITTER_US:-50} OMP_NUM_THREADS=1)
torch_py "${envs[@]}" -- tests/torch/case_ddp.py spawn "$tmp/plain.d" > "$tmp/plain" 2> "$tmp/plain.err" & plain_pid=$!
torch_shim "${envs[@]}" TRAINSHIM_LOG="$tmp/log.%p" -- tests/torch/case_ddp.py spawn "$tmp/shim.d" \
  > "$tmp/shim" 2> "$tmp/shim.err" || { echo "spawned DDP under the shim failed:"; grep -v '^frame' "$tmp/shim.err" | tail -20; exit 1; }
wait $plain_pid || { echo "spawned DDP without the shim failed:"; tail -20 "$tmp/plain.err"; exit 1; }
cat "$tmp/shim"
grep -qx '0:backend native' "$tmp/shim" && grep -qx '1:backend native' "$tmp/shim"
grep -q '^0:rank 0 ddp ' "$tmp/shim" && grep -q '^1:rank 1 ddp ' "$tmp/shim"
same_output "ddp spawn" "$tmp/plain" "$tmp/shim"
no_shim_error "$tmp/shim.err"
# the two ranks' logs say why torch's allocator was left alone
n=0
for log in "$tmp"/log.*; do
  line=$("$TRAINSHIM" report "$log" | grep '^torch alloc' || true)
  [ -n "$line" ] || continue
  case $line in "torch alloc   left alone for torch.distributed"*) n=$((n + 1)) ;;
    *) echo "$log: $line"; exit 1 ;; esac
done
[ $n = 2 ] || { echo "$n rank logs with the torch backend line, want 2"; exit 1; }
echo "PASS: torch.multiprocessing.spawn DDP completes under the default, identical without the shim"
