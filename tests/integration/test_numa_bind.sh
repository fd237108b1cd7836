#!/usr/bin/env bash
# TRAINSHIM_NUMA on a fake two-node machine.  TRAINSHIM_SYSFS_ROOT (a test
# aid) points the shim at a sysfs tree written here: the emulator's GPU 0
# (bus 00000000:18:00.0) is on node 1 with CPU 1, GPU 1 (28:00.0) on node 0
# with CPU 0.  test_numa_bind prints its affinity (main thread and a thread
# started before CUDA), the memory policy of its mappings and of a
# cudaHostAlloc block, and its data results, which must be the same with and
# without the shim.
#
# This machine has one memory node: the kernel places every page on node 0
# whatever the policy, so the memory checks read the POLICY requested for
# the buffers (get_mempolicy on the address, /proc/self/numa_maps), not the
# physical placement; and a binding to node 1 has no memory node to prefer
# (the shim says so once and binds the CPUs only).
set -u
B=${B:-build}
prog=$B/tests/integration/test_numa_bind
shim=$PWD/$B/libtrainshim.so
ts=$B/trainshim
for f in "$prog" "$shim" "$ts"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
[ "$(nproc --all)" -ge 2 ] && taskset -c 0,1 true 2>/dev/null || { echo "FAIL: needs CPUs 0 and 1"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# gpu ROOT BUS NODE CPULIST: one PCI device of a fake sysfs
gpu() { mkdir -p "$1/bus/pci/devices/$2"; echo "$3" > "$1/bus/pci/devices/$2/numa_node"; echo "$4" > "$1/bus/pci/devices/$2/local_cpulist"; }
two=$tmp/sys/two;     gpu "$two" 0000:18:00.0 1 1;    gpu "$two" 0000:28:00.0 0 0
wide=$tmp/sys/wide;   gpu "$wide" 0000:18:00.0 1 0-1; gpu "$wide" 0000:28:00.0 1 0-1
nocpu=$tmp/sys/nocpu; gpu "$nocpu" 0000:18:00.0 1 ""
junk=$tmp/sys/junk;   gpu "$junk" 0000:18:00.0 1 "1-x"

export LD_LIBRARY_PATH=$B/emu EMU_DEVICES=2 EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_SYSFS_ROOT=$two
# run NAME DEVICE [env...] [launcher...]: output in $tmp/NAME, stderr in
# $tmp/NAME.err, log $tmp/NAME.log; every run starts on CPUs 0,1 (the machine
# may have more), as a launcher would start it
run() {
  local name=$1 dev=$2; shift 2
  taskset -c 0,1 env TRAINSHIM_LOG="$tmp/$name.log" "$@" "$prog" "$dev" > "$tmp/$name" 2> "$tmp/$name.err" ||
    { bad "run $name ($*) failed:"; cat "$tmp/$name" "$tmp/$name.err"; }
}
val() { awk -v k="$2" '$1 == "numa:" && $2 == k { $1 = ""; $2 = ""; sub(/^  /, ""); print }' "$tmp/$1"; }
warnings() { grep -c '^trainshim: warning' "$tmp/$1.err"; }
want() { # NAME KEY VALUE
  local got; got=$(val "$1" "$2")
  [ "$got" = "$3" ] || bad "$1: $2 is '$got', want '$3'"
}
want_warnings() { # NAME COUNT [PATTERN]
  local n; n=$(warnings "$1")
  [ "$n" = "$2" ] || { bad "$1: $n warnings, want $2:"; cat "$tmp/$1.err"; }
  [ -z "${3:-}" ] || grep -q "$3" "$tmp/$1.err" || bad "$1: no warning matching '$3'"
}
report_has() { # NAME TEXT...: every line appears in the report
  local name=$1; shift
  "$ts" report "$tmp/$name.log" > "$tmp/$name.report" 2>&1 || bad "$name: report failed"
  for l in "$@"; do grep -qxF -- "$l" "$tmp/$name.report" || { bad "$name: report lacks '$l':"; grep '^numa' "$tmp/$name.report"; }; done
}

run plain 0
run plain1 1
run off 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=off
run report 0 LD_PRELOAD="$shim"
run bind0 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind
run bind1 1 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind

# the program's results do not depend on the shim or its binding
for n in off report bind0 bind1; do
  diff <(grep '^data:' "$tmp/plain") <(grep '^data:' "$tmp/$n") > /dev/null || { bad "data differs ($n):"; diff <(grep '^data:' "$tmp/plain") <(grep '^data:' "$tmp/$n"); }
done
grep -q '^data: round trip identical' "$tmp/plain" || bad "plain run: round trip not identical"

# without the shim, off and report: nothing changes
for n in plain off report; do
  want $n main 'cpus 0,1'; want $n thread-before 'cpus 0,1'
  want $n placed-vmas-after 0; want $n host-alloc 'policy 0 nodes -'
  want_warnings $n 0
done
"$ts" report "$tmp/off.log" | grep -q '^numa' && bad "off: the report has NUMA lines"
report_has report 'numa          GPU 0 (00000000:18:00.0) on node 1 (CPUs 1)' \
  'numa process  CPUs 0-1, memory policy default' 'numa match    no: CPUs 0 are off node 1'
grep -q '^- GPU 0 is on NUMA node 1 but the process may run on CPUs 0 off it; TRAINSHIM_NUMA=bind binds it, or numactl --cpunodebind=1 --membind=1, or torchrun --numa-binding=node$' "$tmp/report.report" ||
  bad "report: no NUMA advice line"
"$ts" report --format json "$tmp/report.log" | python3 -c '
import json, sys
n = json.load(sys.stdin)["numa"]
assert n["node"] == 1 and n["allowed_cpus"] == "0-1" and n["match"] is False and n["bound_cpus"] is None, n' ||
  bad "report: JSON numa member"

# bind, GPU on node 1 (CPU 1, no memory node here): every thread on CPU 1
want bind0 main 'cpus 1'; want bind0 thread-before 'cpus 1'
want bind0 host-alloc 'policy 0 nodes -'
want_warnings bind0 1 'node 1 is not a memory node'
report_has bind0 'numa bound    CPUs 1 (TRAINSHIM_NUMA=bind), pinned buffers not placed (node 1 is not a memory node there)' \
  'numa match    yes'

# bind, GPU on node 0 (CPU 0): threads on CPU 0, the staging ring's and the
# host cache's buffers prefer node 0 (MPOL_PREFERRED = 1)
want bind1 main 'cpus 0'; want bind1 thread-before 'cpus 0'
want bind1 placed-vmas-before 0
after=$(val bind1 placed-vmas-after)
[ "${after:-0}" -ge 1 ] || bad "bind1: no staging buffer mapping with a node preference ($after)"
want bind1 host-alloc 'policy 1 nodes 0'
want_warnings bind1 0
report_has bind1 'numa bound    CPUs 0 (TRAINSHIM_NUMA=bind), pinned buffers on node 0' 'numa match    yes'
grep -q 'NUMA node' "$tmp/bind1.report" && bad "bind1: NUMA advice although the run matches"

# a launcher's narrower affinity is never widened
run narrow_out 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind taskset -c 0
want narrow_out main 'cpus 0'; want narrow_out thread-before 'cpus 0'
want_warnings narrow_out 1 "none of node 1's CPUs (1) is allowed (0)"
report_has narrow_out 'numa bound    no: none of node 1'"'"'s CPUs is allowed (TRAINSHIM_NUMA=bind)' 'numa match    no: CPUs 0 are off node 1'
grep -q 'the launcher excluded the node' "$tmp/narrow_out.report" || bad "narrow_out: advice does not name the launcher"
run narrow_in 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind TRAINSHIM_SYSFS_ROOT="$wide" taskset -c 1
want narrow_in main 'cpus 1'; want narrow_in thread-before 'cpus 1'

# bind:split: local ranks sharing the node (one visible GPU each) ...
for r in 0 1; do
  run split$r 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind:split TRAINSHIM_SYSFS_ROOT="$wide" EMU_DEVICES=1 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2
  want split$r main "cpus $r"; want split$r thread-before "cpus $r"; want_warnings split$r 1 'not a memory node'
done
report_has split1 'numa bound    CPUs 1 (TRAINSHIM_NUMA=bind:split, share 2 of 2), pinned buffers not placed (node 1 is not a memory node there)'
# ... and ranks that see every GPU: the GPUs on the node share it
for d in 0 1; do
  run splitdev$d $d LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind:split TRAINSHIM_SYSFS_ROOT="$wide"
  want splitdev$d main "cpus $d"
done
run nosplit 1 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind TRAINSHIM_SYSFS_ROOT="$wide" LOCAL_RANK=1 LOCAL_WORLD_SIZE=2
want nosplit main 'cpus 0,1'

# bad input: one warning, nothing changes
run badvalue 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=sideways
want badvalue main 'cpus 0,1'; want_warnings badvalue 1 'TRAINSHIM_NUMA'
report_has badvalue 'numa match    no: CPUs 0 are off node 1'
run nosysfs 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind TRAINSHIM_SYSFS_ROOT="$tmp/none"
want nosysfs main 'cpus 0,1'; want nosysfs placed-vmas-after 0; want_warnings nosysfs 1 'numa_node unreadable'
report_has nosysfs 'numa          GPU 0 (00000000:18:00.0) on no known node (sysfs names none)' 'numa match    unknown'
run nosysfs_report 0 LD_PRELOAD="$shim" TRAINSHIM_SYSFS_ROOT="$tmp/none"
want_warnings nosysfs_report 0
run nocpu 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind TRAINSHIM_SYSFS_ROOT="$nocpu"
want nocpu main 'cpus 0,1'; want_warnings nocpu 1 'lists no CPUs'
run junk 0 LD_PRELOAD="$shim" TRAINSHIM_NUMA=bind TRAINSHIM_SYSFS_ROOT="$junk"
want junk main 'cpus 0,1'; want_warnings junk 1 'local_cpulist is not a CPU list'

# the two-rank demo (mpirun when present): every rank's section has its GPU's node and binding
DEMO_STEPS=3 DEMO_LOGDIR="$tmp/demo" TRAINSHIM_NUMA=bind taskset -c 0,1 bash scripts/demo.sh > "$tmp/demo.out" 2>&1 || { bad "demo failed:"; tail -20 "$tmp/demo.out"; }
if grep -q '^== RANK 1 ==' "$tmp/demo.out"; then
  for r in "0 1 1" "1 0 0"; do
    set -- $r
    grep -A4 "^== RANK $1 ==" "$tmp/demo.out" | grep -qxF "numa          GPU $1 (00000000:$((18 + 10 * $1)):00.0) on node $2 (CPUs $3)" ||
      bad "demo: rank $1's section lacks its NUMA node"
    grep -A4 "^== RANK $1 ==" "$tmp/demo.out" | grep -q "^numa bound    CPUs $3 (TRAINSHIM_NUMA=bind)" || bad "demo: rank $1 not bound"
  done
else
  grep -qxF 'numa          GPU 0 (00000000:18:00.0) on node 1 (CPUs 1)' "$tmp/demo.out" || bad "demo: no NUMA line"
fi

# libnuma is loaded at run time, never linked: the shim loads without it
readelf -d "$shim" | grep -q 'libnuma' && bad "libtrainshim.so links libnuma"

[ $fail = 0 ] && echo "ok: report, bind (threads and pinned buffers), launcher affinity kept, bind:split, bad input"
exit $fail
