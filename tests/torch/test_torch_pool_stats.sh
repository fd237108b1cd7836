#!/usr/bin/env bash
# torch's memory statistics under backend:cudaMallocAsync, the user's own
# PYTORCH_CUDA_ALLOC_CONF so that the run without the shim has it too
# (tests/torch/case_pool_stats.py), with and without the shim: every
# allocated-bytes figure (current, peak, after reset_peak_memory_stats and
# empty_cache, memory_stats, memory_summary) identical; the reserved figures
# are each allocator's own pages (trainshim's in 2 MiB pages, the emulator's
# pool by size class), so for them the invariants are checked: at least the
# allocated bytes, a peak at least the current value and equal to it right
# after the reset, empty_cache leaves at most one 2 MiB page of slack per
# live tensor, nothing reserved once all is freed and trimmed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} EMU_UNKNOWN_KERNELS=skip
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
torch_py -- tests/torch/case_pool_stats.py > "$tmp/plain" 2> "$tmp/plain.err" || { tail -5 "$tmp/plain.err"; exit 1; }
torch_shim TRAINSHIM_LOG="$tmp/log.%p" -- tests/torch/case_pool_stats.py > "$tmp/shim" 2> "$tmp/shim.err" || { tail -5 "$tmp/shim.err"; exit 1; }
grep -qx ok "$tmp/shim"
grep '^A' "$tmp/plain" > "$tmp/plain.A"; grep '^A' "$tmp/shim" > "$tmp/shim.A"
same_output "allocated figures" "$tmp/plain.A" "$tmp/shim.A"
if grep -q '^trainshim: error:' "$tmp/shim.err"; then grep '^trainshim: error:' "$tmp/shim.err"; exit 1; fi
want_torch_alloc "cudaMallocAsync, the user's" "$tmp"/log.*
# the shim served the tensors (else the figures above would be the emulator's own)
"$TRAINSHIM" report --format json "$tmp"/log.* > "$tmp/report.json"
"$TORCH_PY" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
m = json.load(open(f"{tmp}/report.json"))["memory"]
assert m["alloc_calls"] >= 11, m
for name in ("plain", "shim"):
    rows = [l.split() for l in open(f"{tmp}/{name}") if l.startswith("R ")]
    assert len(rows) >= 15, rows
    for _, tag, alloc, res, max_res, st_res, st_max in rows[1:]:  # start: stats not yet made
        alloc, res, max_res, st_res, st_max = map(int, (alloc, res, max_res, st_res, st_max))
        assert res >= alloc and max_res >= res, (name, tag, alloc, res, max_res)
        assert (st_res, st_max) == (res, max_res), (name, tag)
        if tag == "reset_peak":
            assert max_res == res, (name, tag, res, max_res)
        if tag == "all_freed":
            assert res == 0, (name, tag, res)
        if tag == "empty_cache":
            assert res <= alloc + 2 * (2 << 20), (name, tag, alloc, res)
    print(name, "reserved:", " ".join(f"{r[1]}={r[3]}" for r in rows[-4:]))
print("allocated figures identical with and without the shim;", len(open(f"{tmp}/shim.A").readlines()), "lines")
PY
