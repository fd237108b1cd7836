# Sourced by tests/torch/test_*.sh and scripts/demo-torch.sh: the venv's
# python and how to run it on the CUDA emulator, with or without the shim.
#
#   torch_env            exit 77 (skipped) when the venv cannot be made
#   torch_py  [ENV=V...] -- ARGS...   python ARGS on the emulator, no shim
#   torch_shim [ENV=V...] -- ARGS...  the same with libtrainshim.so first
#
# torch's RPATH points at its own nvidia/* wheels, so LD_LIBRARY_PATH alone
# cannot put the emulator underneath it: the emulator's libraries are
# preloaded, which makes them the ones loaded under their sonames.  The shim,
# when present, comes first, as `trainshim run` puts it.
#
# TORCH_ON_GPU=1 (scripts/gpu-check.sh sets it): the real driver instead, no
# emulator and no venv: torch is $TORCH_PYTHON's (default python3), and
# torch_shim preloads the shim alone.
B=${B:-build}
TORCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TORCH_CASES=$TORCH_REPO/tests/torch
case $B in /*) TORCH_B=$B ;; *) TORCH_B=$TORCH_REPO/$B ;; esac
EMU_DIR=$TORCH_B/emu
SHIM_LIB=$TORCH_B/libtrainshim.so
TRAINSHIM=$TORCH_B/trainshim

torch_env() {
  local rc=0
  if [ "${TORCH_ON_GPU:-0}" = 1 ]; then
    TORCH_PY=${TORCH_PYTHON:-python3} EMU_PRELOAD="" EMU_DIR="" TORCH_EMU_NCCL=0 TORCH_EMU_NVML=0
    "$TORCH_PY" -c 'import torch' > /dev/null 2>&1 || { echo "$TORCH_PY has no torch" >&2; exit 77; }
    [ -f "$SHIM_LIB" ] || { echo "$SHIM_LIB missing: run make all" >&2; exit 1; }
    export TORCH_PY EMU_PRELOAD EMU_DIR TORCH_EMU_NCCL TORCH_EMU_NVML
    return 0
  fi
  TORCH_PY=$(bash "$TORCH_REPO/scripts/setup-torch.sh") || rc=$?
  if [ $rc = 77 ]; then exit 77; fi
  if [ $rc != 0 ]; then echo "setup-torch.sh failed (exit $rc)" >&2; exit 1; fi
  for f in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    [ -f "$EMU_DIR/$f" ] || { echo "$EMU_DIR/$f missing: run make all" >&2; exit 1; }
  done
  [ -f "$SHIM_LIB" ] || { echo "$SHIM_LIB missing: run make all" >&2; exit 1; }
  EMU_PRELOAD=$EMU_DIR/libcuda.so.1:$EMU_DIR/libcudart.so.13:$EMU_DIR/libcublas.so.13:$EMU_DIR/libcublasLt.so.13
  # NCCL and NVML: the emulator's, once it provides them with the exports
  # torch's wheels import (an NCCL without ncclCommResume fails torch's import).
  if nm -D --defined-only "$EMU_DIR/libnccl.so.2" 2>/dev/null | grep -w ncclCommResume > /dev/null; then
    EMU_PRELOAD=$EMU_PRELOAD:$EMU_DIR/libnccl.so.2
    TORCH_EMU_NCCL=1
  else
    TORCH_EMU_NCCL=0
  fi
  if [ -f "$EMU_DIR/libnvidia-ml.so.1" ]; then
    EMU_PRELOAD=$EMU_PRELOAD:$EMU_DIR/libnvidia-ml.so.1
    TORCH_EMU_NVML=1
  else
    TORCH_EMU_NVML=0
  fi
  export TORCH_PY EMU_PRELOAD TORCH_EMU_NCCL TORCH_EMU_NVML
}

# _torch_launch PRELOAD [ENV=V...] -- ARGS...
_torch_launch() {
  local preload=$1; shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local libs=$EMU_DIR${LD_LIBRARY_PATH:+${EMU_DIR:+:}$LD_LIBRARY_PATH}
  env LD_LIBRARY_PATH="$libs" LD_PRELOAD="$preload" \
    PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 "${envs[@]}" "$TORCH_PY" "$@"
}
# need_torch_nccl: fails the test when the emulator's NCCL cannot stand in
# for torch's (after torch_env)
need_torch_nccl() {
  [ "$TORCH_EMU_NCCL" = 1 ] ||
    { echo "the emulator's libnccl.so.2 lacks the exports torch's NCCL wheel has (ncclCommResume)"; exit 1; }
}
torch_py() { _torch_launch "$EMU_PRELOAD" "$@"; }
torch_shim() { _torch_launch "$SHIM_LIB${EMU_PRELOAD:+:$EMU_PRELOAD}" "$@"; }

# gpt_mem OUT RUNNER [ENV=V...] -- GPT_ARGS...: tests/torch/gpt_small.py in
# skip mode (the real allocations, no arithmetic) with torch's peak figures
# after it (tests/bench/torch_gpt_mem.py), run by RUNNER (torch_py or
# torch_shim); stdout to OUT, stderr to OUT.err.  Fails with the end of
# OUT.err, or when the shim fell back to passthrough.
gpt_mem() {
  local out=$1 runner=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  "$runner" EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip "${envs[@]}" \
    -- tests/bench/torch_gpt_mem.py tests/torch/gpt_small.py "$@" > "$out" 2> "$out.err" \
    || { echo "gpt_small.py ($runner ${envs[*]}) failed:"; tail -30 "$out.err"; return 1; }
  no_shim_error "$out.err"
}

# no_shim_error FILE: fails when the shim fell back to passthrough (its one
# "trainshim: error:" line) in the stderr saved in FILE
no_shim_error() {
  if grep -q '^trainshim: error:' "$1"; then
    echo "the shim reported an internal error:"; grep '^trainshim: error:' "$1"; return 1
  fi
}

# want_torch_alloc WORDS LOG...: fails unless the report of the logs says
# how the shim left torch's allocator in those words (the start of the RUN
# section's first "torch alloc" line): each test names the backend it means
want_torch_alloc() {
  local want=$1 line; shift
  line=$("$TRAINSHIM" report "$@" | grep -m1 '^torch alloc' || true)
  case $line in "torch alloc   $want"*) return 0 ;; esac
  echo "torch's allocator was not '$want': '${line:-no torch alloc line}'"; return 1
}

# same_output NAME FILE_A FILE_B: fails with a diff when they differ
same_output() {
  if ! cmp -s "$2" "$3"; then
    echo "$1: output differs with the shim:"; diff "$2" "$3" | head -20
    return 1
  fi
}
