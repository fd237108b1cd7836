#!/usr/bin/env bash
# DDP on two ranks through torchrun with backend nccl over the emulator's
# NCCL, on two emulated devices (tests/torch/case_ddp.py): explicit
# collectives with exact results, then DistributedDataParallel steps (torch's
# own kernels skipped: EMU_UNKNOWN_KERNELS=skip).  Identical output with and
# without the shim; the report of the shim's run shows both ranks'
# collectives with the bytes the script moved.  The shim runs as by default:
# torchrun's WORLD_SIZE makes it leave torch's native allocator to the ranks
# (torch's NCCL process group aborts at teardown under cudaMallocAsync).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
need_torch_nccl
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run_ddp() { # preload-runner out-prefix [env...]
  local runner=$1 out=$2; shift 2
  "$runner" EMU_DEVICES=2 EMU_UNKNOWN_KERNELS=skip EMU_JITTER_US=${EMU_JITTER_US:-50} OMP_NUM_THREADS=1 "$@" -- \
    -m torch.distributed.run --standalone --nnodes 1 --nproc_per_node 2 --tee 3 --log-dir "$tmp/tr.$out" \
    tests/torch/case_ddp.py > "$tmp/$out.raw" 2> "$tmp/$out.err" ||
    { echo "torchrun ($out) failed:"; tail -30 "$tmp/$out.err"; cat "$tmp/$out.raw"; exit 1; }
  # torchrun prefixes each line with its rank; lines of one rank keep their order
  sed -n 's/^\[default\([0-9]*\)\]:/\1:/p' "$tmp/$out.raw" | sort -s -t: -k1,1n > "$tmp/$out"
}
run_ddp torch_py plain & plain_pid=$!
run_ddp torch_shim shim TRAINSHIM_LOG="$tmp/log.%p"
wait $plain_pid
cat "$tmp/plain"
grep -q '^0:rank 0 collectives ok' "$tmp/plain" && grep -q '^1:rank 1 collectives ok' "$tmp/plain"
same_output ddp "$tmp/plain" "$tmp/shim"
no_shim_error "$tmp/shim.err"
for log in "$tmp"/log.*; do
  "$TRAINSHIM" report "$log" | grep -q '^torch alloc' || continue # torchrun itself: no device pool
  want_torch_alloc "left alone for torch.distributed" "$log"
done
sizes=$(sed -n 's/^0:sizes //p' "$tmp/plain")
# one log per process that used CUDA: the two ranks (the launcher did not)
"$TRAINSHIM" report --format json "$tmp"/log.* > "$tmp/report.json"
"$TORCH_PY" - "$tmp/report.json" "$sizes" <<'PY'
import json, sys
r, z = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
ranks = {x["run"]["rank"]: x for x in r["ranks"]}
assert sorted(ranks) == [0, 1], f"logs of ranks {sorted(ranks)}, want 0 and 1"
grad, steps = z["ddp_grad_bytes"], z["ddp_steps"]
# what the script moved per rank, by op: its explicit collectives, DDP's
# initial parameter broadcast and one all-reduce of every gradient per step
want = {"AllReduce": z["all_reduce"] + steps * grad, "Broadcast": z["broadcast"] + grad,
        "AllGather": z["all_gather"], "ReduceScatter": z["reduce_scatter"]}
# torch's own bookkeeping adds a few small collectives (barrier: a one-element
# all-reduce; DDP's parameter-shape check: an all-gather of a few integers)
SLACK = 1024
for rank, x in sorted(ranks.items()):
    ops = {o["op"]: o for o in x["nccl"]["ops"]}
    p2p = "Send" if rank == 0 else "Recv"
    assert ops[p2p]["bytes"] == z["p2p"] and ops[p2p]["calls"] == 1, (rank, ops.get(p2p))
    for op, n in want.items():
        got = ops[op]["bytes"]
        assert n <= got <= n + SLACK, f"rank {rank} {op}: {got} bytes in the report, the script moved {n}"
        assert ops[op]["failed_calls"] == 0, (rank, ops[op])
    comms = x["nccl"]["communicators"]
    assert any(c["size"] == 2 and c["rank"] == rank for c in comms), (rank, comms)
    print(f"rank {rank}:", ", ".join(f"{op} {ops[op]['calls']} calls {ops[op]['bytes']} B (script {n})"
                                    for op, n in list(want.items()) + [(p2p, z["p2p"])]))
PY
