#!/usr/bin/env bash
# Creates the cached Python venv the PyTorch suite (tests/torch) and
# `make demo-torch` run in, outside the repository:
#   ${TRAINSHIM_TORCH_VENV:-$HOME/.cache/trainshim/torch-venv}
# Installs the pinned torch (its CUDA 13 wheels) and numpy from PyPI once; a
# stamp file holding the pins makes later calls a no-op, and a changed pin
# reinstalls.  Prints the venv's python on stdout.
# Exit status: 0 ready; 77 PyPI cannot be reached (one "skipped:" line on
# stderr: callers count that as skipped, never as passed); 1 anything else.
set -euo pipefail
TORCH_VERSION=2.15.0
NUMPY_VERSION=2.4.6
PINS="torch==$TORCH_VERSION numpy==$NUMPY_VERSION"
venv=${TRAINSHIM_TORCH_VENV:-$HOME/.cache/trainshim/torch-venv}
stamp="$venv/.trainshim-pins"
PYTHON=${PYTHON:-python3}

ready() { [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$PINS" ]; }
if ready; then echo "$venv/bin/python"; exit 0; fi

mkdir -p "$(dirname "$venv")"
# One installer at a time: concurrent callers wait, then find the stamp.
exec 9>"$venv.lock"
flock 9
if ready; then echo "$venv/bin/python"; exit 0; fi

index=${PIP_INDEX_URL:-https://pypi.org/simple}
if ! "$PYTHON" - "$index" <<'EOF'; then
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=20).read(1)
except Exception as e:
    sys.exit(1)
EOF
  echo "skipped: PyPI ($index) cannot be reached; the PyTorch suite needs $PINS in $venv" >&2
  exit 77
fi

echo "trainshim: installing $PINS into $venv (once; several GB)" >&2
rm -rf "$venv" "$stamp"
"$PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION" >&2
"$venv/bin/python" -c 'import torch, numpy; assert torch.version.cuda, "torch without CUDA"' >&2
echo "$PINS" >"$stamp"
echo "$venv/bin/python"
