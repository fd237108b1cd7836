#!/usr/bin/env bash
# torch.cuda.memory._record_memory_history()/_snapshot() under the shim
# (tests/torch/case_memory_history.py checks the snapshot's contents): the
# same snapshot, addresses aside, with and without the shim, under the
# default caching allocator and with expandable segments.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
for conf in expandable_segments:False expandable_segments:True; do
  torch_py PYTORCH_CUDA_ALLOC_CONF=$conf -- tests/torch/case_memory_history.py "$tmp/plain.pickle" > "$tmp/plain.out"
  torch_shim PYTORCH_CUDA_ALLOC_CONF=$conf TRAINSHIM_LOG="$tmp/log.%p" -- \
    tests/torch/case_memory_history.py "$tmp/shim.pickle" > "$tmp/shim.out"
  grep -qx ok "$tmp/shim.out"
  same_output "$conf" "$tmp/plain.out" "$tmp/shim.out"
  echo "$conf: snapshot identical with and without the shim: $(grep '^segments' "$tmp/shim.out")"
done
