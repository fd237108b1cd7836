#!/usr/bin/env bash
# The allocator's multi-threaded stress (tests/unit/test_alloc_threads.c)
# rebuilt with ThreadSanitizer from the allocator's own sources, in a
# temporary directory, and run: any data race report fails the test.
set -eu
cd "$(dirname "$0")/../.."
CC_TSAN=${CC_TSAN:-$(command -v clang || command -v gcc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
srcs="$(ls shim/alloc/*.c) tests/support/pool_check.c tools/replay/sim_provider.c"
"$CC_TSAN" -std=gnu11 -O1 -g -fsanitize=thread -D_GNU_SOURCE -Wall -Wextra -Werror -Ishim -Itools \
  -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$tmp/test_alloc_threads" \
  tests/unit/test_alloc_threads.c $srcs -pthread
TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" "$tmp/test_alloc_threads" 3000
# The usage figures with two threads' caches holding parked blocks: the
# counter and the caches' parked bytes are read across threads.
"$CC_TSAN" -std=gnu11 -O1 -g -fsanitize=thread -D_GNU_SOURCE -Wall -Wextra -Werror -Ishim -Itools \
  -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$tmp/test_alloc_usage" \
  tests/unit/test_alloc_usage.c $srcs -pthread
TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" "$tmp/test_alloc_usage"
