#!/usr/bin/env bash
# Multi-rank on a real launcher: Open MPI's mpirun starts two ranks of the demo
# trainer (build/workloads/mlp_train, data parallel through the emulated NCCL)
# under the shim, with TRAINSHIM_LOG=.../rank%r.log and emulator jitter, in
# three forms: `mpirun ... trainshim run -- mlp_train`, `trainshim run --
# mpirun ... mlp_train` and `mpirun -x LD_PRELOAD=libtrainshim.so ... mlp_train`.
#   - one log per rank, named by the rank the shim found in Open MPI's
#     environment (OMPI_COMM_WORLD_RANK), and nothing else;
#   - `trainshim report` over both logs: both ranks, and per rank the NCCL
#     calls and bytes the program made (one AllReduce of every parameter per
#     step, the parameter count taken from the model's sizes in
#     tests/workloads/mlp_train.cu; one AllGather of the weights checksum), the
#     GEMM FLOPs of the rank's half of the batch, the per-rank table and the
#     straggler lines;
#   - every rank's losses and the weights are bit-identical with and without
#     the shim (also in the LD_PRELOAD form, with an explicit MLP_RENDEZVOUS),
#     and with torchrun's variables instead of mpirun; the average of the
#     ranks' losses is the single-process loss of the same global batch (so
#     the gradients really are averaged across ranks);
#   - a rank whose rank 0 never shows up fails with a clear message, ignoring
#     a stale rendezvous file.
# mpirun comes from Debian's openmpi-bin, which scripts/setup.sh installs
# (`make test` runs it first): without it this test fails, it does not skip.
set -u
B=${B:-build}
bin=$PWD/$B/workloads/mlp_train
tool=$PWD/$B/trainshim
shim=$PWD/$B/libtrainshim.so
src=$PWD/tests/workloads/mlp_train.cu
if ! command -v mpirun > /dev/null; then
  echo "FAIL: mpirun not found: scripts/setup.sh installs it (Debian package openmpi-bin; run 'make setup' or 'bash scripts/setup.sh')"
  exit 1
fi
for f in "$bin" "$tool" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50}
# a launcher's variables inherited from the environment this test runs in
# would name the ranks instead of mpirun's
unset RANK WORLD_SIZE LOCAL_RANK SLURM_PROCID SLURM_LOCALID SLURM_NTASKS PMI_RANK PMI_SIZE \
  TORCHELASTIC_RUN_ID MLP_RENDEZVOUS MLP_RENDEZVOUS_TIMEOUT TRAINSHIM_LOG
# the rendezvous file named after the launcher's job id goes to TMPDIR: keep it in $tmp
export TMPDIR=$tmp
STEPS=8 BATCH=256
# --oversubscribe: two ranks even on a one-core CI machine; --bind-to none: no
# pinning inside a container; btl self,tcp: no shared-memory transport probing.
mpi=(mpirun -np 2 --oversubscribe --bind-to none --mca btl self,tcp)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# rank_lines FILE R: rank R's lines of a run's combined stdout, in its order
rank_lines() { grep "^rank $2 " "$1"; }
# run_ok NAME CMD...: runs CMD, stdout to $tmp/NAME.out, stderr to $tmp/NAME.err; a
# rank whose peer never comes would wait in ncclCommInitRank: time limit
run_ok() {
  local name=$1; shift
  if ! timeout -k 5 60 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"; then
    echo "FAIL: $name run failed: $*"; cat "$tmp/$name.out" "$tmp/$name.err" | tail -n 30; exit 1
  fi
}

# ---- the runs
EMU_SEED=1 run_ok single "$bin" $STEPS $BATCH
for seed in 1 4242; do
  EMU_SEED=$seed run_ok plain.$seed "${mpi[@]}" "$bin" $STEPS $BATCH
done
mkdir "$tmp/logs" "$tmp/pre" "$tmp/wrap"
EMU_SEED=4242 run_ok shim "${mpi[@]}" "$tool" run --log "$tmp/logs/rank%r.log" -- "$bin" $STEPS $BATCH
# trainshim run around the launcher: mpirun itself is preloaded too, and writes no log
EMU_SEED=5 run_ok wrap "$tool" run --log "$tmp/wrap/rank%r.log" -- "${mpi[@]}" "$bin" $STEPS $BATCH
EMU_SEED=1 run_ok preload "${mpi[@]}" -x LD_PRELOAD="$shim" -x TRAINSHIM_LOG="$tmp/pre/r%r.log" \
  -x MLP_RENDEZVOUS="$tmp/explicit.id" "$bin" $STEPS $BATCH
# torchrun's variables, two processes started by hand
for r in 0 1; do
  EMU_SEED=7 WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r MLP_RENDEZVOUS="$tmp/torch.id" timeout -k 5 60 "$bin" $STEPS $BATCH \
    > "$tmp/torch.$r.out" 2> "$tmp/torch.$r.err" &
  eval "torch_pid_$r=\$!"
done
for r in 0 1; do
  eval "wait \$torch_pid_$r" || { bad "torchrun-style rank $r failed:"; cat "$tmp/torch.$r.err"; }
done
cat "$tmp/torch.0.out" "$tmp/torch.1.out" > "$tmp/torch.out"

# ---- outputs: identical per rank across seeds, launchers, with and without the shim
for run in plain.4242 shim wrap preload torch; do
  for r in 0 1; do
    cmp -s <(rank_lines "$tmp/plain.1.out" $r) <(rank_lines "$tmp/$run.out" $r) ||
      { bad "rank $r's losses differ between the plain run and '$run':"; diff <(rank_lines "$tmp/plain.1.out" $r) <(rank_lines "$tmp/$run.out" $r) | head; }
  done
  cmp -s <(grep -v '^rank ' "$tmp/plain.1.out") <(grep -v '^rank ' "$tmp/$run.out") ||
    { bad "banner or checksum differ between the plain run and '$run':"; diff <(grep -v '^rank ' "$tmp/plain.1.out") <(grep -v '^rank ' "$tmp/$run.out"); }
done
for r in 0 1; do
  n=$(rank_lines "$tmp/plain.1.out" $r | grep -c "^rank $r step [0-9]* loss [0-9.]*$")
  [ "$n" = $STEPS ] || bad "rank $r printed $n loss lines, want $STEPS"
done
[ "$(grep -c '^weights checksum [0-9a-f]\{16\}$' "$tmp/plain.1.out")" = 1 ] || bad "want one checksum line (rank 0's)"
ls "$tmp"/*.ncclid > /dev/null 2>&1 && bad "rendezvous file left behind: $(ls "$tmp"/*.ncclid)"
[ -e "$tmp/explicit.id" ] && bad "MLP_RENDEZVOUS file left behind"

# ---- logs: one per rank, named by rank
[ "$(cd "$tmp/logs" && ls | tr '\n' ' ')" = "rank0.log rank1.log " ] || bad "logs of the trainshim run: $(ls "$tmp/logs")"
[ "$(cd "$tmp/pre" && ls | tr '\n' ' ')" = "r0.log r1.log " ] || bad "logs of the LD_PRELOAD run: $(ls "$tmp/pre")"
[ "$(cd "$tmp/wrap" && ls | tr '\n' ' ')" = "rank0.log rank1.log " ] || bad "logs of trainshim run -- mpirun: $(ls "$tmp/wrap")"
"$tool" report --format json "$tmp/logs/rank0.log" "$tmp/logs/rank1.log" > "$tmp/report.json" || bad "report --format json failed"
"$tool" report "$tmp/logs/rank0.log" "$tmp/logs/rank1.log" > "$tmp/report.txt" || bad "text report failed"
"$tool" report --format json "$tmp/pre/r0.log" "$tmp/pre/r1.log" > "$tmp/pre.json" || bad "report over the LD_PRELOAD logs failed"
"$tool" report --format json "$tmp/wrap/rank0.log" "$tmp/wrap/rank1.log" > "$tmp/wrap.json" || bad "report over the wrapped run's logs failed"

# ---- the report holds what the program did
python3 - "$src" "$tmp/plain.1.out" "$tmp/single.out" $STEPS $BATCH "$tmp/report.json" "$tmp/pre.json" "$tmp/wrap.json" <<'PY' || fail=1
import json, re, sys
src, plain, single = sys.argv[1:4]
steps, batch = int(sys.argv[4]), int(sys.argv[5])
reports = sys.argv[6:]
bad = []
dims = dict(re.findall(r"^#define (IN|HID|OUT) (\d+)$", open(src).read(), re.M))
IN, HID, OUT = (int(dims[k]) for k in ("IN", "HID", "OUT"))
params = HID * IN + HID + OUT * HID + OUT             # W1, b1, W2, b2
out = open(plain).read()
m = re.search(r"^data parallel: 2 ranks x (\d+) samples, (\d+) parameters", out, re.M)
if not m or int(m[1]) != batch // 2 or int(m[2]) != params:
    bad.append(f"banner {m and m[0]!r}, want {batch // 2} samples per rank and {params} parameters")
local = batch // 2
# forward W1 x, W2 h; backward dW2, dh, dW1 (m, n, k)
gemms = [(HID, local, IN), (OUT, local, HID), (OUT, HID, local), (HID, local, OUT), (HID, IN, local)]
flops = steps * sum(2 * m * n * k for m, n, k in gemms)
want_ops = {"AllReduce": (steps, steps * params * 4, steps * params * 4),   # S = count x 4 B
            "AllGather": (1, 8, 2 * 8)}                                    # S = 8 B x 2 ranks
for path in reports:
    rep = json.load(open(path))
    if len(rep["ranks"]) != 2: bad.append(f"{path}: {len(rep['ranks'])} ranks"); continue
    for i, r in enumerate(rep["ranks"]):
        run, n = r["run"], r["nccl"]
        if (run["rank"], run["world_size"], run["status"]) != (i, 2, "complete"):
            bad.append(f"log {i}: rank/world/status {run['rank']}/{run['world_size']}/{run['status']}")
        ops = {o["op"]: o for o in n["ops"]}
        got = {op: (o["calls"], o["bytes"], o["algo_bytes"]) for op, o in ops.items()}
        if got != want_ops: bad.append(f"rank {i} NCCL ops {got}, want {want_ops}")
        for op, o in ops.items():   # n = 2: busbw = algbw x 2(n-1)/n for AllReduce, x (n-1)/n for AllGather
            if o["timed_calls"] and abs(o["busbw_gbps"] - o["algbw_gbps"] * (1.0 if op == "AllReduce" else 0.5)) > 1e-3 * o["algbw_gbps"] + 1e-6:
                bad.append(f"rank {i} {op}: busbw {o['busbw_gbps']} vs algbw {o['algbw_gbps']}")
        comms = [(c["size"], c["rank"], c["calls"], c["bytes"]) for c in n["communicators"]]
        if comms != [(2, i, steps + 1, steps * params * 4 + 8)]: bad.append(f"rank {i} communicators {comms}")
        if (n["comms_created"], n["comms_destroyed"]) != (1, 1): bad.append(f"rank {i} comms {n['comms_created']}/{n['comms_destroyed']}")
        if r["compute"]["gemm_flops"] != flops: bad.append(f"rank {i} gemm_flops {r['compute']['gemm_flops']}, want {flops}")
    ra = rep["total"]["rank_accounting"]
    if [x["rank"] for x in ra["ranks"]] != [0, 1] or any(x["steps"] != steps for x in ra["ranks"]):
        bad.append(f"{path}: rank table {ra['ranks']}")
    if any(x["estimated_collective_ns"] <= 0 for x in ra["ranks"]):
        bad.append(f"{path}: a rank spent no time in collectives: {ra['ranks']}")
    if len(ra["steps"]) < steps - 2: bad.append(f"{path}: {len(ra['steps'])} steps lined up, want >= {steps - 2}")
    for st in ra["steps"]:
        if {st["slowest_rank"], st["fastest_rank"]} - {0, 1} or st["slowest_ns"] < st["fastest_ns"]:
            bad.append(f"{path}: straggler line {st}")
# data parallelism is real: the ranks' mean loss is the one-process loss of the global batch
ranks = {}
for r, s, l in re.findall(r"^rank (\d) step (\d+) loss (\S+)$", out, re.M): ranks.setdefault(int(s), []).append(float(l))
for s, l in re.findall(r"^step (\d+) loss (\S+)$", open(single).read(), re.M):
    got, want = sum(ranks.get(int(s), [0, 0])) / 2, float(l)
    if len(ranks.get(int(s), [])) != 2 or abs(got - want) > 1e-4 * want + 2e-6:
        bad.append(f"step {s}: mean rank loss {got} != single-process loss {want}")
for b in bad: print("FAIL:", b)
if not bad: print(f"ok: 2 ranks x {steps} steps: AllReduce {steps} x {params * 4} B, GEMM {flops} FLOPs per rank")
sys.exit(1 if bad else 0)
PY
for pat in '^== RANK 0 ==$' '^== RANK 1 ==$' '^== COMMUNICATION ==$' '^AllReduce  *'$STEPS' ' \
           '^== RANKS: COMPUTE AND COMMUNICATION ==$' '^step  *slowest ms  *rank  *fastest ms  *rank  *spread$'; do
  [ "$(grep -c -- "$pat" "$tmp/report.txt")" -ge 1 ] || bad "text report lacks /$pat/"
done
rows=$(awk '/^step  *slowest ms/ { on = 1; next } on && /^[0-9]+ / { n++ } END { print n + 0 }' "$tmp/report.txt")
[ "$rows" -ge $((STEPS - 2)) ] || bad "$rows straggler rows, want >= $((STEPS - 2))"

# ---- RANK/WORLD_SIZE with no rendezvous only name the process: it trains alone
EMU_SEED=1 WORLD_SIZE=2 RANK=1 run_ok alone "$bin" $STEPS $BATCH
cmp -s "$tmp/single.out" "$tmp/alone.out" || bad "RANK=1 WORLD_SIZE=2 without a rendezvous did not train alone"
grep -q "WORLD_SIZE=2 but no MLP_RENDEZVOUS or TORCHELASTIC_RUN_ID.*training alone" "$tmp/alone.err" ||
  bad "no warning that RANK=1 WORLD_SIZE=2 trains alone: $(cat "$tmp/alone.err")"

# ---- a rank without its rank 0: clear error after the timeout, a stale file ignored
printf 'mlp_train-ncclid-v1 world 2\n%0256d\n' 0 > "$tmp/stale.id"
touch -d '1 hour ago' "$tmp/stale.id"
if WORLD_SIZE=2 RANK=1 MLP_RENDEZVOUS="$tmp/stale.id" MLP_RENDEZVOUS_TIMEOUT=1 "$bin" 1 8 > /dev/null 2> "$tmp/lonely.err"; then
  bad "rank 1 without rank 0 succeeded"
fi
grep -q "rank 1 of 2: no NCCL id from rank 0 in $tmp/stale.id after 1 s" "$tmp/lonely.err" ||
  { bad "rank 1 without rank 0: unclear error:"; cat "$tmp/lonely.err"; }
[ $fail = 0 ] && echo "ok: mpirun -np 2 under trainshim: per-rank logs, report, bit-identical training"
exit $fail
