#!/usr/bin/env bash
# Device query, copies and one GEMM (tests/torch/case_basic.py) under torch's
# four allocator setups, each with and without the shim: identical output,
# and the emulator saw the allocator calls each setup is known to make (so a
# setup that silently fell back to another would fail).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}

setups=(default nocache async expandable)
setup_env() {
  case $1 in
    default) echo "TORCH_SETUP=default" ;;
    nocache) echo "PYTORCH_NO_CUDA_MEMORY_CACHING=1" ;;
    async) echo "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" ;;
    expandable) echo "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" ;;
  esac
}
for s in "${setups[@]}"; do
  e=$(setup_env "$s")
  torch_py "$e" -- tests/torch/case_basic.py > "$tmp/plain.$s" 2> "$tmp/plain.$s.err" ||
    { echo "$s without the shim failed:"; tail -20 "$tmp/plain.$s.err"; exit 1; }
  torch_shim "$e" TRAINSHIM_LOG="$tmp/log.$s.%p" -- tests/torch/case_basic.py > "$tmp/shim.$s" 2> "$tmp/shim.$s.err" ||
    { echo "$s with the shim failed:"; tail -20 "$tmp/shim.$s.err"; exit 1; }
  grep -qx ok "$tmp/plain.$s"
  same_output "$s" "$tmp/plain.$s" "$tmp/shim.$s"
  if grep -q '^trainshim: error:' "$tmp/shim.$s.err"; then
    echo "$s: the shim reported an internal error:"; grep '^trainshim: error:' "$tmp/shim.$s.err"; exit 1
  fi
  echo "$s: identical with and without the shim ($(grep '^copies' "$tmp/plain.$s"))"
done
# The setups reach the device allocator differently; the shim's log says how.
for s in "${setups[@]}"; do
  "$TRAINSHIM" report --json "$tmp"/log.$s.* > "$tmp/report.$s.json"
done
"$TORCH_PY" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
r = {s: json.load(open(f"{tmp}/report.{s}.json")) for s in ("default", "nocache", "async", "expandable")}
for s, rep in r.items():
    m = rep["memory"]
    assert m["alloc_calls"] > 0 and m["free_calls"] <= m["alloc_calls"], (s, m)
    print(s, "alloc_calls", m["alloc_calls"], "free_calls", m["free_calls"])
# no caching: one device allocation per tensor, so more calls than the caching allocator's segments
assert r["nocache"]["memory"]["alloc_calls"] > r["default"]["memory"]["alloc_calls"], "nocache made no more allocations than the caching allocator"
PY
