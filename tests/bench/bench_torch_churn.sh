#!/usr/bin/env bash
# torch.empty/del churn of mixed sizes (tests/bench/torch_churn.py), CPU ns per
# tensor, in one run: torch's native caching allocator without the shim (the
# baseline), torch's cudaMallocAsync backend without the shim (the emulated
# driver pool), and trainshim serving every tensor (the shim's default), with
# its log off and logging (to a file).
#
# A shared machine drifts by tens of percent within seconds, so separate
# runs one after the other cannot decide a few percent.  Instead the four
# are four processes started together and driven in turn, one short round
# each (CHURN_ITERS iterations, two tensors each), CHURN_ROUNDS times, the
# order reversed every other round; each round is timed in the churning
# thread's own CPU time, after CHURN_WARM untimed iterations that bring back
# into the caches what the other processes' rounds evicted (a process with
# the larger working set would otherwise pay more for the interleaving
# itself).  A process's speed also varies from one start to the next (a
# set's median alone by up to +-0.05 here), so this is done with CHURN_SETS
# sets of four fresh processes (8: about a minute; with 3, the whole figure
# varied by +-0.03 from one invocation to the next).  The ratio
# printed is the median, over every round of every set, of the round's
# trainshim figure against the native round next to it: the same work,
# measured within milliseconds of its baseline; each set's own median
# follows.  Process CPU time (every thread: the emulator's, the log's
# writer) is printed beside the thread's.
# Skipped (exit 0 with a line) when the torch venv cannot be made.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build}
SETS=${CHURN_SETS:-8}
ROUNDS=${CHURN_ROUNDS:-60}
ITERS=${CHURN_ITERS:-1000}
WARM=${CHURN_WARM:-500}
. tests/torch/lib.sh
rc=0
( torch_env ) > /dev/null 2>&1 || rc=$?
[ $rc = 0 ] || { echo "skipped: no torch venv (scripts/setup-torch.sh exit $rc)"; exit 0; }
logdir=$(mktemp -d /tmp/bench_churn_XXXXXX)
trap 'rm -rf "$logdir"' EXIT
# each child: the launch line of tests/torch/lib.sh, serving rounds
serve() { echo ". tests/torch/lib.sh && torch_env && $* -- tests/bench/torch_churn.py --serve 2> /dev/null"; }
B=$B python3 - "$SETS" "$ROUNDS" "$ITERS" "$WARM" \
  "native=$(serve torch_py)" \
  "async=$(serve torch_py PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)" \
  "shim=$(serve torch_shim TRAINSHIM_LOG=off)" \
  "shim_log=$(serve torch_shim "TRAINSHIM_LOG=$logdir/churn.%p.log")" << 'PY'
import statistics, subprocess, sys

sets, rounds, iters, warm = (int(v) for v in sys.argv[1:5])
runs = [arg.split("=", 1) for arg in sys.argv[5:]]
names = [name for name, _ in runs]


def start(name, cmd):
    p = subprocess.Popen(["bash", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = p.stdout.readline().split()
    want = "native" if name == "native" else "cudaMallocAsync"
    if ready != ["ready", want]:
        print(f"  the {name} run did not start on torch's {want} allocator ({' '.join(ready) or 'no answer'})")
        sys.exit(1)
    return p


def drive(procs, thread, process):
    """One set: every process's rounds, in turn."""
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            p = procs[name]
            p.stdin.write(f"round {iters} {warm}\n")
            p.stdin.flush()
            fields = p.stdout.readline().split()
            if len(fields) != 2:
                print(f"  the {name} run stopped at round {r}")
                sys.exit(1)
            thread[name].append(float(fields[0]))
            process[name].append(float(fields[1]))


thread = {n: [] for n in names}
process = {n: [] for n in names}
set_ratios = []
for _ in range(sets):
    procs = {name: start(name, cmd) for name, cmd in runs}
    first = len(thread["native"])
    drive(procs, thread, process)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    t = {n: v[first:] for n, v in thread.items()}
    set_ratios.append(tuple(statistics.median(a / b for a, b in zip(t[n], t["native"])) for n in ("shim", "shim_log")))
med = statistics.median
print(f"torch.empty/del churn, CPU ns per tensor: {sets} sets of processes, {rounds} rounds each of {2 * iters} "
      f"tensors per run (after {2 * warm} untimed), driven in turn round by round; medians over the rounds")
labels = {"native": "torch native caching allocator (baseline)", "async": "torch cudaMallocAsync, no shim",
          "shim": "trainshim-served, log off", "shim_log": "trainshim-served, logging"}
print(f"  {'':<44} {'thread':>8} {'process':>8}")
for n in names:
    print(f"  {labels[n]:<44} {med(thread[n]):8.0f} {med(process[n]):8.0f}")
for what, t in (("thread", thread), ("process", process)):
    ratios = {n: sorted(a / b for a, b in zip(t[n], t["native"])) for n in ("shim", "shim_log")}
    q = lambda v, f: v[int(f * (len(v) - 1))]
    print(f"  trainshim / native ({what} CPU), median of per-round ratios: {med(ratios['shim']):.3f}x log off, "
          f"{med(ratios['shim_log']):.3f}x logging  (quartiles {q(ratios['shim'], .25):.3f}-"
          f"{q(ratios['shim'], .75):.3f}, {q(ratios['shim_log'], .25):.3f}-{q(ratios['shim_log'], .75):.3f})")
print("  per set (thread CPU): " + ", ".join(f"{a:.3f}x/{b:.3f}x" for a, b in set_ratios) + " (log off/logging)")
PY
