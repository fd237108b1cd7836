#!/usr/bin/env bash
# Builds the harnesses tests/fuzz/fuzz_logread.c (the parser and the report)
# and tests/fuzz/fuzz_logstream.c (the streaming file reader against the
# parser) with libFuzzer + ASan + UBSan (clang) and runs each for SECONDS
# (default 60), seeded with tests/fuzz/corpus and the golden logs.  New
# inputs go to $B/fuzz/corpus, crashes to $B/fuzz/artifacts.
#   tests/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]
# Exit status: 0 when no crash was found.
set -eu
cd "$(dirname "$0")/../.."
B=${B:-build}
SECS=${1:-60}
shift || true
CLANG=${CLANG:-$(command -v clang-14 || command -v clang)}
out=$B/fuzz
mkdir -p "$out/corpus" "$out/artifacts"
# the harness includes tools/read/logread.c and tools/cmd/cmd_report.c; the report's
# other parts (tools/report/*.c, tools/html/*.c, tools/read/symbolize.c) are linked beside it, and
# the shim's core library for the names the report shares with it
extra=$(ls tools/report/report_*.c tools/html/html_*.c tools/read/symbolize.c 2>/dev/null || true)
[ -f "$B/libtscore.a" ] || { echo "fuzz: $B/libtscore.a missing: run make first" >&2; exit 1; }
# shellcheck disable=SC2086
"$CLANG" -std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-function \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Ishim -Itools -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$out/fuzz_logread" \
  tests/fuzz/fuzz_logread.c $extra "$B/libtscore.a" -ldl -lpthread -lm -lrt \
  $(pkg-config --libs libunwind libdw 2>/dev/null || true)
"$CLANG" -std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-function \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Ishim -Itools -o "$out/fuzz_logstream" tests/fuzz/fuzz_logstream.c "$B/libtscore.a" -ldl -lpthread -lm -lrt
cp -n tests/fuzz/corpus/* tests/golden/*.tslog "$out/corpus/" 2>/dev/null || true
for target in fuzz_logread fuzz_logstream; do
  "$out/$target" -max_total_time="$SECS" -max_len=65536 -timeout=10 \
    -artifact_prefix="$out/artifacts/$target-" -print_final_stats=1 "$@" "$out/corpus" || exit 1
done
