#!/usr/bin/env bash
# The thread caches' synchronous path under threads
# (tests/unit/test_devmem_fast_pool.c) rebuilt with ThreadSanitizer from the
# allocator's own sources, in a temporary directory, and run: any data race
# report fails the test.
set -eu
cd "$(dirname "$0")/../.."
CC_TSAN=${CC_TSAN:-$(command -v clang || command -v gcc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
srcs="$(ls shim/alloc/*.c) tests/support/pool_check.c tools/replay/sim_provider.c"
"$CC_TSAN" -std=gnu11 -O1 -g -fsanitize=thread -D_GNU_SOURCE -Wall -Wextra -Werror -Ishim -Itools \
  -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$tmp/test_devmem_fast_pool" \
  tests/unit/test_devmem_fast_pool.c $srcs -pthread
TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" "$tmp/test_devmem_fast_pool" 3000
