#!/usr/bin/env bash
# Installs what trainshim's build, demo and tests need on a fresh Debian
# machine, and checks for the CUDA toolkit.  Idempotent and quiet when
# everything is present.
set -euo pipefail
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cuda.h" ] || [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "trainshim: error: CUDA toolkit not found at CUDA_HOME=$CUDA_HOME (need include/cuda.h and bin/nvcc)." >&2
  echo "trainshim: install the CUDA 13 toolkit or set CUDA_HOME." >&2
  exit 1
fi
# Debian packages: libunwind (native stacks), elfutils' libdw (symbols), libnuma
# (NUMA memory policy: dlopen()ed at run time, never linked),
# Open MPI (multi-rank tests), clang + its runtime (fuzzing, sanitizers),
# clang-format (make format, scripts/check-layout.sh), Chromium (the HTML
# report's headless browser test).
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in libunwind-dev libdw-dev libnuma-dev openmpi-bin libopenmpi-dev clang libclang-rt-14-dev clang-format pkg-config \
  python3 chromium; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "trainshim: installing ${need[*]}" >&2
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
exit 0
