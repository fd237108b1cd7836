#!/usr/bin/env bash
# torch.cuda.memory._record_memory_history()/_snapshot() under the shim
# (tests/torch/case_memory_history.py checks the snapshot's contents): the
# same snapshot, addresses aside, with and without the shim, under the
# user's choice of torch's caching allocator, with expandable segments, and
# with no choice at all (PYTORCH_CUDA_ALLOC_CONF unset, the shim's default):
# torch refuses history and snapshots under cudaMallocAsync, so the shim
# sees the script's history calls and leaves torch's native allocator.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
for conf in expandable_segments:False expandable_segments:True unset; do
  conf_env=(); [ $conf = unset ] || conf_env=(PYTORCH_CUDA_ALLOC_CONF=$conf)
  torch_py "${conf_env[@]}" -- tests/torch/case_memory_history.py "$tmp/plain.pickle" > "$tmp/plain.out" &
  plain_pid=$!
  torch_shim "${conf_env[@]}" TRAINSHIM_LOG="$tmp/log.$conf.%p" -- \
    tests/torch/case_memory_history.py "$tmp/shim.pickle" > "$tmp/shim.out" 2> "$tmp/shim.err" || { cat "$tmp/shim.err"; exit 1; }
  wait $plain_pid
  grep -qx ok "$tmp/shim.out"
  same_output "$conf" "$tmp/plain.out" "$tmp/shim.out"
  no_shim_error "$tmp/shim.err"
  case $conf in
    unset) want="left alone: the script calls torch's memory history" ;;
    expandable_segments:True) want="native expandable_segments, the user's" ;;
    *) want="native, the user's" ;;
  esac
  want_torch_alloc "$want" "$tmp"/log.$conf.*
  echo "$conf: snapshot identical with and without the shim: $(grep '^segments' "$tmp/shim.out")"
done
