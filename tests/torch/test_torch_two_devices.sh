#!/usr/bin/env bash
# Tensors on two devices from one process (tests/torch/case_two_devices.py),
# under backend:cudaMallocAsync (the user's own, so that the run without the
# shim has it too), with and without the shim: every tensor's device, as
# torch and as the driver see it, each device's allocated bytes and peaks,
# and the checksums of the data copied across devices, identical.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-50}
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
torch_py -- tests/torch/case_two_devices.py > "$tmp/plain" 2> "$tmp/plain.err" || { tail -5 "$tmp/plain.err"; exit 1; }
torch_shim TRAINSHIM_LOG="$tmp/log.%p" -- tests/torch/case_two_devices.py > "$tmp/shim" 2> "$tmp/shim.err" \
  || { tail -5 "$tmp/shim.err"; exit 1; }
grep -qx ok "$tmp/shim"
same_output "two devices" "$tmp/plain" "$tmp/shim"
no_shim_error "$tmp/shim.err"
want_torch_alloc "cudaMallocAsync, the user's" "$tmp"/log.*
# the shim served the tensors on both devices (else the figures above would be the emulator's own)
"$TRAINSHIM" report --format json "$tmp"/log.* | "$TORCH_PY" -c '
import json, sys
devs = sorted(d["device"] for d in json.load(sys.stdin)["memory"]["pool_devices"])
assert devs == [0, 1], devs'
echo "two devices: the same with and without the shim: $(grep -c . "$tmp/plain") lines"
