#!/usr/bin/env bash
# The build dependencies a bare GPU machine may lack (libunwind for the shim's
# stacks, libdw for the report's symbols), as Debian packages in .gpu-deps/,
# and nccl.h
# (git-ignored; carry it to the GPU machine with the working tree).
#   scripts/gpu-deps.sh download   here: apt-get download the .deb files
#   scripts/gpu-deps.sh extract    there (scripts/gpu-check.sh does it when
#                                  pkg-config finds no libunwind or libdw):
#                                  unpack into .gpu-deps/root and write a
#                                  pkg-config stand-in to .gpu-deps/bin that
#                                  answers for libunwind and libdw from there
set -eu
cd "$(dirname "$0")/.."
D=.gpu-deps
PKGS="libunwind8 libunwind-dev libdw1 libdw-dev libelf1 libelf-dev liblzma5 libzstd1 libbz2-1.0 zlib1g"
case ${1:-} in
download)
  mkdir -p "$D"
  (cd "$D" && apt-get download $PKGS)
  # nccl.h, for a toolkit without it (the library comes with torch's wheel)
  mkdir -p "$D/include"
  cp "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" "$D/include/" 2>/dev/null || echo "no nccl.h to copy" >&2
  ls -la "$D"
  ;;
extract)
  root=$PWD/$D/root lib=$PWD/$D/root/usr/lib/x86_64-linux-gnu
  rm -rf "$root" && mkdir -p "$root" "$D/bin"
  for deb in "$D"/*.deb; do
    if command -v dpkg-deb > /dev/null; then dpkg-deb -x "$deb" "$root"
    else  # no dpkg: a .deb is an ar archive holding data.tar.*
      tmp=$(mktemp -d); (cd "$tmp" && ar x "$OLDPWD/$deb"); tar -xf "$tmp"/data.tar.* -C "$root"; rm -rf "$tmp"
    fi
  done
  # Debian's lib dir may be /lib or /usr/lib: make both visible under usr/lib.
  if [ -d "$root/lib/x86_64-linux-gnu" ]; then cp -an "$root/lib/x86_64-linux-gnu/." "$lib/"; fi
  cat > "$D/bin/pkg-config" <<PC
#!/bin/sh
# stand-in written by scripts/gpu-deps.sh extract: libunwind and libdw from $root
case "\$*" in
  *--exists*) exit 0 ;;
  *libunwind*) echo "-L$lib -Wl,-rpath-link,$lib -lunwind" ;;
  *libdw*) echo "-L$lib -Wl,-rpath-link,$lib -ldw -lelf" ;;
  *) exit 1 ;;
esac
PC
  chmod +x "$D/bin/pkg-config"
  ls "$lib" | grep -E 'unwind|dw|elf' | head
  ;;
*) echo "usage: scripts/gpu-deps.sh download|extract" >&2; exit 2 ;;
esac
