#!/usr/bin/env bash
# fetch-nvml-header.sh OUT: puts NVML's header (nvml.h) at OUT, for the
# emulated libnvidia-ml.so.1.  Taken from the CUDA toolkit when it has one
# ($CUDA_HOME/include/nvml.h), else from PyPI's nvidia-nvml-dev wheel (the
# version tests/emu/symbols/nvml.txt was generated from), cached under
# ${XDG_CACHE_HOME:-~/.cache}/trainshim so that build folders share one download.
set -euo pipefail
out=$1
version=13.5.37
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$(dirname "$out")"
if [ -f "$CUDA_HOME/include/nvml.h" ]; then
  cp "$CUDA_HOME/include/nvml.h" "$out"
  exit 0
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/trainshim/nvml-$version
if [ ! -f "$cache/nvml.h" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! python3 -m pip download -q --no-deps --dest "$tmp" "nvidia-nvml-dev==$version" >&2; then
    echo "trainshim: error: nvml.h is not in $CUDA_HOME/include and nvidia-nvml-dev==$version could not be downloaded from PyPI" >&2
    exit 1
  fi
  mkdir -p "$cache"
  python3 - "$tmp" "$cache/nvml.h" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("/include/nvml.h"))
    open(sys.argv[2], "wb").write(z.read(name))
PY
fi
cp "$cache/nvml.h" "$out"
