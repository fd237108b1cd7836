#!/usr/bin/env bash
# The shim's load-time choice of torch's allocator backend.  By default (no
# TRAINSHIM_TORCH_BACKEND) and with no backend named, torch runs on
# cudaMallocAsync (the user's other keys kept), so trainshim serves every
# tensor; TRAINSHIM_TORCH_BACKEND=off, a backend or expandable_segments the
# user named and PYTORCH_NO_CUDA_MEMORY_CACHING leave torch's own choice; so
# do a distributed launch (WORLD_SIZE: torch's NCCL process group aborts at
# teardown under cudaMallocAsync, test_torch_ddp; its spawned form,
# test_torch_ddp_spawn), a script that creates a process group itself
# (tests/torch/case_process_group.py, aborted without this rule) and a script whose own source calls torch's memory
# history or snapshots, which torch refuses under cudaMallocAsync (the
# script file and `python -c`), or uses what torch also refuses there:
# torch.multiprocessing (sharing CUDA tensors), torch.compile's CUDA graphs
# (max-autotune-no-cudagraphs stays served), a torch.cuda.MemPool
# (tests/torch/case_backend_refused.py: each is refused under the backend the
# shim would add, and reaches the driver under the one it leaves).  The report's RUN section names the case, and
# ADVICE explains what torch's allocator, when the user's or the script's
# need, keeps from trainshim.  A program without torch just sees the variable.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
bad=0
# name | env | torch's backend | conf torch read | RUN line words [| python args]
check() {
  local name=$1 envs=$2 want_backend=$3 want_conf=$4 want_run=$5
  shift 5
  [ $# -gt 0 ] || set -- tests/torch/case_backend.py
  # shellcheck disable=SC2086
  torch_shim $envs TRAINSHIM_LOG="$tmp/log.$name" -- "$@" > "$tmp/$name" 2> "$tmp/$name.err" \
    || { echo "$name: failed"; tail -5 "$tmp/$name.err"; bad=1; return; }
  grep -qx "backend $want_backend" "$tmp/$name" || { echo "$name: not $want_backend:"; cat "$tmp/$name"; bad=1; }
  grep -qx "conf $want_conf" "$tmp/$name" || { echo "$name: conf not '$want_conf':"; cat "$tmp/$name"; bad=1; }
  "$TRAINSHIM" report "$tmp/log.$name" > "$tmp/$name.report"
  grep -q "^torch alloc   $want_run" "$tmp/$name.report" || { echo "$name: RUN lacks '$want_run':"; grep -A8 '== RUN' "$tmp/$name.report"; bad=1; }
  echo "$name: $(grep '^torch alloc' "$tmp/$name.report")"
}
ADDED="cudaMallocAsync, added by trainshim (the default)"
check default "" cudaMallocAsync "backend:cudaMallocAsync" "$ADDED"
check named_on "TRAINSHIM_TORCH_BACKEND=cudaMallocAsync" cudaMallocAsync "backend:cudaMallocAsync" "$ADDED"
check kept_keys "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8" cudaMallocAsync \
  "backend:cudaMallocAsync,garbage_collection_threshold:0.8" "$ADDED"
check user_async "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" cudaMallocAsync "backend:cudaMallocAsync" \
  "cudaMallocAsync, the user's"
check user_native "PYTORCH_CUDA_ALLOC_CONF=backend:native" native "backend:native" "native, the user's"
check user_expandable "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" native "expandable_segments:True" \
  "native expandable_segments"
check user_tuned "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False" native "expandable_segments:False" \
  "native, the user's"
check off "TRAINSHIM_TORCH_BACKEND=off" native "-" "left alone (TRAINSHIM_TORCH_BACKEND=off)"
check distributed "WORLD_SIZE=1" native "-" "left alone for torch.distributed"
need_torch_nccl
check process_group "" native "-" "left alone for torch.distributed" tests/torch/case_process_group.py
grep -qx "all_reduce ok" "$tmp/process_group" || { echo "process_group: all_reduce not ok"; bad=1; }
HISTORY="left alone: the script calls torch's memory history"
check history "" native "-" "$HISTORY" tests/torch/case_backend_history.py
check history_c "" native "-" "$HISTORY" -c "$(cat tests/torch/case_backend_history.py)"
for name in history history_c; do
  grep -qx "snapshot allocs 1" "$tmp/$name" || { echo "$name: the snapshot lacks the tensor:"; cat "$tmp/$name"; bad=1; }
done
# what else torch refuses under cudaMallocAsync: the script file as a whole,
# then each section alone through -c (its function and the loop, named)
REFUSED=tests/torch/case_backend_refused.py
check refused_file "" native "-" "left alone: the script uses torch.multiprocessing" "$REFUSED"
section() { # the file with only function $1 defined (the others' words left out)
  python3 - "$REFUSED" "$1" <<'PY'
import re, sys
src, keep = open(sys.argv[1]).read(), sys.argv[2]
out = []
for block in re.split(r"\n(?=def |print\()", src):
    name = re.match(r"def (\w+)", block)
    if not name or name.group(1) == keep:
        out.append(block)
print("\n".join(l for l in "\n".join(out).splitlines() if not l.startswith("#")))
PY
}
check refused_share "" native "-" "left alone: the script uses torch.multiprocessing" -c "$(section share)" share
check refused_graphs "" native "-" "left alone: the script compiles with CUDA graphs" -c "$(section checkpoint)" checkpoint
check refused_mempool "" native "-" "left alone: the script uses torch.cuda.MemPool" -c "$(section mempool)" mempool
for name in refused_file refused_share refused_graphs refused_mempool; do
  if grep -q " refused$" "$tmp/$name"; then echo "$name: torch refused a call under the backend left to it:"; cat "$tmp/$name"; bad=1; fi
  grep -q "^- torch's own allocator (kept: the script" "$tmp/$name.report" || { echo "$name: no ADVICE line"; bad=1; }
done
# the same calls under the backend the shim adds are refused (what the rule avoids)
torch_shim PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync TRAINSHIM_LOG=off -- "$REFUSED" > "$tmp/refused_async" 2>&1 || true
[ "$(grep -c ' refused$' "$tmp/refused_async")" = 3 ] || { echo "under cudaMallocAsync torch did not refuse all three:"; cat "$tmp/refused_async"; bad=1; }
# max-autotune without CUDA graphs is served; with them, not
SHOW='torch.empty(1, device="cuda"); print("backend", torch._C._cuda_getAllocatorBackend()); print("conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))'
check autotune_plain "" cudaMallocAsync "backend:cudaMallocAsync" "$ADDED" \
  -c "import os, torch; MODE = \"max-autotune-no-cudagraphs\"; $SHOW"
check autotune "" native "-" "left alone: the script compiles with CUDA graphs" \
  -c "import os, torch; MODE = \"max-autotune\"; $SHOW"
for name in user_native user_expandable history history_c; do
  grep -q "^- torch's own allocator" "$tmp/$name.report" || { echo "$name: no ADVICE line"; bad=1; }
done
for name in default kept_keys user_async off distributed process_group; do
  if grep -q "^- torch's own allocator" "$tmp/$name.report"; then echo "$name: ADVICE about torch's allocator"; bad=1; fi
done
# without torch: only the variable, which the program sees
out=$(env LD_PRELOAD="$SHIM_LIB" LD_LIBRARY_PATH="$EMU_DIR" sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset}"')
[ "$out" = "backend:cudaMallocAsync" ] || { echo "shell: '$out'"; bad=1; }
out=$(env LD_PRELOAD="$SHIM_LIB" LD_LIBRARY_PATH="$EMU_DIR" TRAINSHIM_TORCH_BACKEND=off sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset}"')
[ "$out" = "unset" ] || { echo "TRAINSHIM_TORCH_BACKEND=off changed the variable: '$out'"; bad=1; }
out=$(env LD_PRELOAD="$SHIM_LIB" LD_LIBRARY_PATH="$EMU_DIR" TRAINSHIM=0 sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset}"')
[ "$out" = "unset" ] || { echo "TRAINSHIM=0 changed the variable: '$out'"; bad=1; }
exit $bad
