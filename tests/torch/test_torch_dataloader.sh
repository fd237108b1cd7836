#!/usr/bin/env bash
# DataLoader(num_workers=2, pin_memory=True) feeding GEMMs on the emulated
# device (tests/torch/case_dataloader.py): identical output with and without
# the shim, and the shim saw the pinned batches' host-to-device copies.  The
# shim runs as by default: it adds backend:cudaMallocAsync, so trainshim
# serves torch's tensors (the run without it: torch's native allocator).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
torch_py -- tests/torch/case_dataloader.py > "$tmp/plain.out" & plain_pid=$!
torch_shim TRAINSHIM_LOG="$tmp/log.%p" -- tests/torch/case_dataloader.py > "$tmp/shim.out" 2> "$tmp/shim.err" || { cat "$tmp/shim.err"; exit 1; }
wait $plain_pid
grep -qx ok "$tmp/plain.out"
same_output dataloader "$tmp/plain.out" "$tmp/shim.out"
no_shim_error "$tmp/shim.err"
want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp"/log.*
# Only the main process touches CUDA: the workers' logs (if any) hold no copies.
"$TRAINSHIM" report --format json "$tmp"/log.* > "$tmp/report.json"
"$TORCH_PY" - "$tmp/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["copies"]
batch_bytes = 512 * 40 * 4
assert c["h2d_bytes"] >= batch_bytes, c
assert c["h2d_pageable_bytes"] < batch_bytes, ("the batches came from pageable memory", c)
print("dataloader: identical with and without the shim; h2d", c["h2d_bytes"], "bytes, pageable", c["h2d_pageable_bytes"])
PY
