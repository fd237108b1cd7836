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

# shim_default: the user names no allocator and the shim, by default, adds
# backend:cudaMallocAsync at load time, so the run must match torch's
# cudaMallocAsync backend without the shim (case_basic.py guards its snapshot
# call with get_allocator_backend(), so the shim does not take it for a
# script that needs torch's memory history).  default: torch's native
# allocator under the shim (TRAINSHIM_TORCH_BACKEND=off, as a user keeps it).
# The other three are the user's own PYTORCH_CUDA_ALLOC_CONF choices.
setups=(default nocache async expandable shim_default)
setup_env() {
  case $1 in
    default) echo "TORCH_SETUP=default" ;;
    nocache) echo "PYTORCH_NO_CUDA_MEMORY_CACHING=1" ;;
    async) echo "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" ;;
    expandable) echo "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" ;;
    shim_default) echo "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" ;;
  esac
}
shim_env() {
  case $1 in
    default) echo "TRAINSHIM_TORCH_BACKEND=off" ;;
    shim_default) echo "TORCH_SETUP=shim_default" ;;
    *) setup_env "$1" ;;
  esac
}
# Every setup runs even after one fails, so one run shows them all.
bad=()
for s in "${setups[@]}"; do
  e=$(setup_env "$s")
  # the two runs at once: the machine has two cores
  torch_py "$e" -- tests/torch/case_basic.py > "$tmp/plain.$s" 2> "$tmp/plain.$s.err" & plain_pid=$!
  shim_rc=0 plain_rc=0
  # shellcheck disable=SC2046 # the setup may name two variables
  torch_shim $(shim_env "$s") TRAINSHIM_LOG="$tmp/log.$s.%p" -- tests/torch/case_basic.py > "$tmp/shim.$s" 2> "$tmp/shim.$s.err" || shim_rc=$?
  wait $plain_pid || plain_rc=$?
  if [ $plain_rc != 0 ]; then
    echo "$s without the shim failed:"; tail -5 "$tmp/plain.$s.err"; bad+=("$s"); continue
  fi
  if [ $shim_rc != 0 ]; then
    echo "$s with the shim failed:"; tail -5 "$tmp/shim.$s.err"; bad+=("$s"); continue
  fi
  grep -qx ok "$tmp/plain.$s"
  want_backend=native; case $s in async|shim_default) want_backend=cudaMallocAsync ;; esac
  grep -q "^devices .* allocator $want_backend\$" "$tmp/plain.$s" || { echo "$s: not the $want_backend allocator"; bad+=("$s"); continue; }
  # torch's snapshot: no segments without caching, none for cudaMallocAsync
  case $s in default) want_segs="expandable \[False\]" ;; expandable) want_segs="expandable \[True\]" ;;
    nocache) want_segs="expandable \[\]" ;; async|shim_default) want_segs= ;; esac
  [ -z "$want_segs" ] || grep -qx "$want_segs" "$tmp/plain.$s" || { echo "$s: segments are not $want_segs"; bad+=("$s"); continue; }
  if ! same_output "$s" "$tmp/plain.$s" "$tmp/shim.$s"; then bad+=("$s"); continue; fi
  if ! no_shim_error "$tmp/shim.$s.err"; then bad+=("$s"); continue; fi
  echo "$s: identical with and without the shim ($(grep '^copies' "$tmp/plain.$s"))"
done
[ ${#bad[@]} = 0 ] || { echo "failed setups: ${bad[*]}"; exit 1; }
# The setups reach the device allocator differently; the shim's log says how.
for s in "${setups[@]}"; do
  "$TRAINSHIM" report --format json "$tmp"/log.$s.* > "$tmp/report.$s.json"
done
"$TORCH_PY" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
r = {s: json.load(open(f"{tmp}/report.{s}.json")) for s in ("default", "nocache", "async", "expandable")}
for s, rep in r.items():
    m = rep["memory"]
    assert m["alloc_calls"] > 0 and m["free_calls"] <= m["alloc_calls"], (s, m)
    print(s, "alloc_calls", m["alloc_calls"], "free_calls", m["free_calls"])
# no caching and cudaMallocAsync: one device allocation per tensor, so more
# calls than the caching allocator's segments
for s in ("nocache", "async"):
    assert r[s]["memory"]["alloc_calls"] > r["default"]["memory"]["alloc_calls"], f"{s} made no more allocations than the caching allocator"
PY
