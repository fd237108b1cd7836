#!/usr/bin/env bash
# The demo training job gives bit-identical output (every step's loss and the
# final weights checksum) with and without the shim, under emulator jitter and
# several seeds; its loss decreases; the shim's log reports what it did.
set -euo pipefail
B=${B:-build}
bin=$PWD/$B/workloads/mlp_train
shim=$PWD/$B/libtrainshim.so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
for seed in 1 7 12345; do
  EMU_SEED=$seed "$bin" 12 256 > "$tmp/plain.$seed"
  EMU_SEED=$seed TRAINSHIM_LOG="$tmp/log.$seed.%p" LD_PRELOAD=$shim "$bin" 12 256 > "$tmp/shim.$seed"
  if ! cmp -s "$tmp/plain.$seed" "$tmp/shim.$seed"; then
    echo "seed $seed: output differs with the shim"; diff "$tmp/plain.$seed" "$tmp/shim.$seed" | head; exit 1
  fi
done
first=$(awk '/^step 0 /{print $4}' "$tmp/plain.1"); last=$(awk '/^step 11 /{print $4}' "$tmp/plain.1")
awk -v a="$first" -v b="$last" 'BEGIN{ if (!(b < a * 0.8)) { print "loss did not decrease: " a " -> " b; exit 1 } }'
grep -q '^weights checksum [0-9a-f]\{16\}$' "$tmp/plain.1"
# the log of one run: 12 steps x 11 per-step buffers + 4 parameters allocated and freed
log=$(ls "$tmp"/log.1.*)
json=$("$B/trainshim" report --format json "$log")
python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
m, c = r["memory"], r["copies"]
want_allocs = 12 * 11 + 4
assert m["alloc_calls"] >= want_allocs, m
assert m["free_calls"] == m["alloc_calls"], m
assert c["h2d_pageable_bytes"] >= 12 * 256 * (64 + 16) * 4, c   # the batches, from pageable memory
assert c["d2h_bytes"] >= 12 * 4, c
print("demo differential ok: allocs", m["alloc_calls"], "h2d", c["h2d_bytes"])
PY
