#!/usr/bin/env bash
# TRAINSHIM_OFFLOAD with the GEMM-only torch training loop
# (tests/torch/case_gemm_train.py at N=2048, D=512, HID=512, O=256, 4 steps:
# torch's caching allocator reserves 92 MiB at peak on an unlimited device)
# on a 56 MiB device (EMU_DEVICE_MEMORY, ~60% of that), the shim as by
# default (it adds backend:cudaMallocAsync: trainshim serves every tensor):
#   - without offload it fails, with trainshim's out-of-memory report;
#   - with TRAINSHIM_OFFLOAD=on, under emulator jitter, every loss and the
#     weights are bit-identical to the run on an unlimited device without
#     the shim, and the report's OFFLOAD section shows the host-backed pages.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=2048,512,512,256,4 small=56M

torch_py GEMM_TRAIN_DIMS=$dims -- tests/torch/case_gemm_train.py cuda "$tmp/plain.pt" > "$tmp/plain.out" &
plain_pid=$!
if torch_shim GEMM_TRAIN_DIMS=$dims EMU_DEVICE_MEMORY=$small TRAINSHIM_LOG="$tmp/nooff.log" -- \
     tests/torch/case_gemm_train.py cuda "$tmp/nooff.pt" > "$tmp/nooff.out" 2> "$tmp/nooff.err"; then
  echo "FAIL: the loop fits in $small without offload: the test proves nothing"; exit 1
fi
grep -q '^trainshim: out of memory on device 0' "$tmp/nooff.err" || { echo "FAIL: no OOM report:"; tail -5 "$tmp/nooff.err"; exit 1; }
wait $plain_pid
torch_shim GEMM_TRAIN_DIMS=$dims EMU_DEVICE_MEMORY=$small TRAINSHIM_OFFLOAD=on EMU_JITTER_US=50 EMU_SEED=3 \
  TRAINSHIM_LOG="$tmp/on.log" -- tests/torch/case_gemm_train.py cuda "$tmp/on.pt" > "$tmp/on.out" 2> "$tmp/on.err" ||
  { echo "FAIL: TRAINSHIM_OFFLOAD=on did not complete:"; tail -5 "$tmp/on.err"; exit 1; }
same_output "offload on, $small" "$tmp/plain.out" "$tmp/on.out"
no_shim_error "$tmp/on.err"
want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp/on.log"
"$TORCH_PY" - "$tmp/plain.pt" "$tmp/on.pt" <<'PY'
import sys, torch
plain, on = (torch.load(p) for p in sys.argv[1:3])
for k in ("w1", "w2", "losses"):
    assert torch.equal(plain[k], on[k]), f"{k} differs with offload"
PY
"$TRAINSHIM" report "$tmp/on.log" > "$tmp/on.txt" 2>&1
grep -q '; [1-9][0-9]* pages backed by the host at an out-of-memory' "$tmp/on.txt" ||
  { echo "FAIL: no host-backed pages in the report:"; sed -n '/== OFFLOAD/,/^$/p' "$tmp/on.txt"; exit 1; }
echo "torch offload ok: $(tail -1 "$tmp/plain.out") on $small, identical with offload under jitter"
