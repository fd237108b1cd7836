#!/usr/bin/env bash
# The shim's load-time choice of torch's allocator backend: by default the
# variable is left alone; with TRAINSHIM_TORCH_BACKEND=cudaMallocAsync and no
# backend named, torch runs on cudaMallocAsync (the user's other keys kept); a
# backend or expandable_segments the user named, PYTORCH_NO_CUDA_MEMORY_CACHING
# and TRAINSHIM_TORCH_BACKEND=off leave torch's own choice; the report's RUN
# section names the case and ADVICE explains what the user's native choice
# costs; a distributed launch (WORLD_SIZE) keeps torch's own allocator, whose
# NCCL process group aborts at teardown under cudaMallocAsync
# (test_torch_ddp); a program without torch just sees the variable.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
bad=0
# name | env | torch's backend | conf torch read | RUN line words
check() {
  local name=$1 envs=$2 want_backend=$3 want_conf=$4 want_run=$5
  # shellcheck disable=SC2086
  torch_shim $envs TRAINSHIM_LOG="$tmp/log.$name" -- tests/torch/case_backend.py > "$tmp/$name" 2> "$tmp/$name.err" \
    || { echo "$name: failed"; tail -5 "$tmp/$name.err"; bad=1; return; }
  grep -qx "backend $want_backend" "$tmp/$name" || { echo "$name: not $want_backend:"; cat "$tmp/$name"; bad=1; }
  grep -qx "conf $want_conf" "$tmp/$name" || { echo "$name: conf not '$want_conf':"; cat "$tmp/$name"; bad=1; }
  "$TRAINSHIM" report "$tmp/log.$name" > "$tmp/$name.report"
  grep -q "^torch alloc   $want_run" "$tmp/$name.report" || { echo "$name: RUN lacks '$want_run':"; grep -A8 '== RUN' "$tmp/$name.report"; bad=1; }
  echo "$name: $(grep '^torch alloc' "$tmp/$name.report")"
}
check default_off "" native "-" "left alone"
A=TRAINSHIM_TORCH_BACKEND=cudaMallocAsync
check added "$A" cudaMallocAsync "backend:cudaMallocAsync" "cudaMallocAsync, added by trainshim"
check kept_keys "$A PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8" cudaMallocAsync \
  "backend:cudaMallocAsync,garbage_collection_threshold:0.8" "cudaMallocAsync, added by trainshim"
check user_async "$A PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" cudaMallocAsync "backend:cudaMallocAsync" \
  "cudaMallocAsync, the user's"
check user_native "$A PYTORCH_CUDA_ALLOC_CONF=backend:native" native "backend:native" "native, the user's"
check user_expandable "$A PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" native "expandable_segments:True" \
  "native expandable_segments"
check user_tuned "$A PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False" native "expandable_segments:False" \
  "native, the user's"
check off "TRAINSHIM_TORCH_BACKEND=off" native "-" "left alone"
check distributed "$A WORLD_SIZE=1" native "-" "left alone in a distributed launch"
for name in user_native user_expandable; do
  grep -q "^- torch's own allocator" "$tmp/$name.report" || { echo "$name: no ADVICE line"; bad=1; }
done
for name in default_off added user_async off; do
  if grep -q "^- torch's own allocator" "$tmp/$name.report"; then echo "$name: ADVICE about torch's allocator"; bad=1; fi
done
# without torch: only the variable, which the program sees
out=$(env "$A" LD_PRELOAD="$SHIM_LIB" LD_LIBRARY_PATH="$EMU_DIR" sh -c 'echo "$PYTORCH_CUDA_ALLOC_CONF"')
[ "$out" = "backend:cudaMallocAsync" ] || { echo "shell: '$out'"; bad=1; }
out=$(env LD_PRELOAD="$SHIM_LIB" LD_LIBRARY_PATH="$EMU_DIR" sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset}"')
[ "$out" = "unset" ] || { echo "the default changed the variable: '$out'"; bad=1; }
out=$(env LD_PRELOAD="$SHIM_LIB" LD_LIBRARY_PATH="$EMU_DIR" TRAINSHIM=0 sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset}"')
[ "$out" = "unset" ] || { echo "TRAINSHIM=0 changed the variable: '$out'"; bad=1; }
exit $bad
