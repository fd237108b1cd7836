#!/usr/bin/env bash
# The emulated libcudart.so.13 carries the real version node: programs linked
# against the toolkit's libcudart (versioned references cudaMalloc@libcudart.so.13)
# load it without "no version information available", and the library imports
# no cu* symbol (it reaches the driver through cuGetProcAddress only).
set -u
B=${B:-build}
lib="$B/emu/libcudart.so.13"
fail=0
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
if nm -D --undefined-only "$lib" | awk '{print $NF}' | grep -E '^cu' ; then
  echo "FAIL: $lib imports driver symbols directly"; fail=1
fi
if ! objdump -T "$lib" | grep -q 'libcudart.so.13.*cudaMalloc$'; then
  echo "FAIL: cudaMalloc is not exported under version libcudart.so.13"; fail=1
fi
for t in test_rt_basic test_rt_kernel; do
  bin="$B/tests/emu/$t"
  [ -x "$bin" ] || { echo "FAIL: $bin not built"; fail=1; continue; }
  # the program must reference the versioned symbol (linked against the real runtime)
  if ! objdump -T "$bin" | grep -q 'libcudart.so.13'; then
    echo "FAIL: $bin has no versioned libcudart.so.13 references"; fail=1
  fi
  err=$(LD_LIBRARY_PATH="$PWD/$B/emu" "$bin" 2>&1 >/dev/null); rc=$?
  [ $rc = 0 ] || { echo "FAIL: $bin exited $rc: $err"; fail=1; }
  if printf '%s\n' "$err" | grep -q 'no version information'; then
    echo "FAIL: $bin: $err"; fail=1
  fi
  # the emulated runtime is the one loaded
  if ! LD_LIBRARY_PATH="$PWD/$B/emu" LD_DEBUG=libs "$bin" 2>&1 | grep -q "calling init: $PWD/$B/emu/libcudart.so.13"; then
    echo "FAIL: $bin did not load $B/emu/libcudart.so.13"; fail=1
  fi
done
[ $fail = 0 ] && echo "test_rt_version: ok"
exit $fail
