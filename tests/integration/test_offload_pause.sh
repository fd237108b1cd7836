#!/usr/bin/env bash
# trainshim_pause / trainshim_resume under injected faults (see
# test_offload_pause.c, whose bare run is the 2 GiB pause and resume): the
# pause of a 64 MiB working set with a failing call of each entry point a
# page move uses (cuMemCreate, cuMemMap, cuMemUnmap, the copy), early and
# late in the move: every byte intact after resume, the emulator's physical
# memory counters back at baseline.  And the gate: a thread copying inside
# the working set while it is paused and resumed 6 times.
set -u
B=${B:-build}
prog=$B/tests/integration/test_offload_pause
shim=$PWD/$B/libtrainshim.so
for f in "$prog" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log" TRAINSHIM_OFFLOAD=on
export EMU_DEVICE_MEMORY=4G EMU_HOST_LINK_GBPS=25
fail=0
run() {   # name, then arguments
  local name=$1; shift
  if LD_PRELOAD="$shim" "$prog" "$@" > "$tmp/$name.out" 2>&1; then
    grep -q "^offload pause ok" "$tmp/$name.out" || { echo "FAIL: $name: no success line"; cat "$tmp/$name.out"; fail=1; }
  else
    echo "FAIL: $name:"; cat "$tmp/$name.out"; fail=1
  fi
}
# spec, and what the pause must report: "failed" where the fault hits a move
# (a page of the 32 is moved by: create, map and unmap the scratch range,
# copy, unmap, map), "completed" where it must not stop it (no host memory
# for one page: it stays; a scratch unmap that fails once is retried)
run gate gate
grep -h "^gate:" "$tmp/gate.out"
while read -r spec want; do
  run "fault.$spec" "fault=$spec"
  got=$(sed -n 's/^pause with fault [^:]*:[^:]*:[^:]*: \([a-z]*\).*/\1/p' "$tmp/fault.$spec.out")
  [ "$got" = "$want" ] || { echo "FAIL: $spec: pause $got, expected $want"; fail=1; }
  grep -h "pause with fault" "$tmp/fault.$spec.out"
done <<'SPECS'
cuMemCreate:3:CUDA_ERROR_OUT_OF_MEMORY completed
cuMemCreate:20:CUDA_ERROR_UNKNOWN failed
cuMemMap:2:CUDA_ERROR_OUT_OF_MEMORY failed
cuMemMap:41:CUDA_ERROR_UNKNOWN failed
cuMemMap:42:CUDA_ERROR_UNKNOWN failed
cuMemUnmap:5:CUDA_ERROR_UNKNOWN completed
cuMemUnmap:6:CUDA_ERROR_UNKNOWN failed
cuMemUnmap:42:CUDA_ERROR_UNKNOWN failed
cuMemcpyDtoD:7:CUDA_ERROR_UNKNOWN failed
SPECS
[ $fail = 0 ] && echo "offload pause ok"
exit $fail
