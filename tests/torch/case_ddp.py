"""Two ranks under torchrun with backend nccl on the emulated devices (or,
with the arguments `spawn DIR`, started by torch.multiprocessing.spawn with a
tcp:// rendezvous and no WORLD_SIZE in the environment, as DDP tutorials do:
each rank's lines go to DIR/rank<N> and the parent prints them in order).

Phase 1, explicit collectives whose results are checked exactly and whose
sizes the test knows: all_reduce, broadcast, all_gather_into_tensor,
reduce_scatter_tensor and a send/recv pair.  Phase 2, a DistributedDataParallel
model of bias-free Linear layers trained for a few steps: its gradients are
all-reduced by DDP's buckets.  Torch's own kernels (the loss, DDP's averaging,
the optimizer) need EMU_UNKNOWN_KERNELS=skip, so phase 2 prints only what does
not depend on their results.  Rank 0 prints "sizes {json}" for the test."""
import hashlib
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

N_AR, N_BC, N_AG, N_RS, N_P2P = 4096, 3000, 1024, 2048, 777
DIMS, STEPS = (64, 96, 32), 3


def filled(n, rank, salt):
    g = torch.Generator().manual_seed(100 * salt + rank)
    return torch.randint(-1000, 1000, (n,), generator=g).float()


def digest(t):
    return hashlib.sha256(t.cpu().numpy().tobytes()).hexdigest()[:16]


def collectives(rank, world, dev):
    every = [filled(N_AR, r, 1) for r in range(world)]
    t = every[rank].to(dev)
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), sum(every)), "all_reduce"
    t = filled(N_BC, rank, 2).to(dev)
    dist.broadcast(t, src=0)
    assert torch.equal(t.cpu(), filled(N_BC, 0, 2)), "broadcast"
    out = torch.empty(world * N_AG).to(dev)
    dist.all_gather_into_tensor(out, filled(N_AG, rank, 3).to(dev))
    assert torch.equal(out.cpu(), torch.cat([filled(N_AG, r, 3) for r in range(world)])), "all_gather"
    every = [filled(world * N_RS, r, 4) for r in range(world)]
    out = torch.empty(N_RS).to(dev)
    dist.reduce_scatter_tensor(out, every[rank].to(dev))
    assert torch.equal(out.cpu(), sum(every)[rank * N_RS:(rank + 1) * N_RS]), "reduce_scatter"
    if rank == 0:
        dist.send(filled(N_P2P, 0, 5).to(dev), dst=1)
    elif rank == 1:
        t = torch.empty(N_P2P).to(dev)
        dist.recv(t, src=0)
        assert torch.equal(t.cpu(), filled(N_P2P, 0, 5)), "send/recv"
    torch.cuda.synchronize()
    print(f"rank {rank} collectives ok {digest(out)}", flush=True)


def ddp_steps(rank, dev):
    torch.manual_seed(0)
    layers = [nn.Linear(a, b, bias=False) for a, b in zip(DIMS, DIMS[1:])]
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers).to(dev), device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(STEPS):
        x = torch.randn(16, DIMS[0], generator=g).to(dev)
        loss = model(x).square().sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    params = sum(p.numel() for p in model.parameters())
    print(f"rank {rank} ddp {STEPS} steps over {params} parameters", flush=True)
    return params


def run(rank, world, dev):
    torch.cuda.set_device(dev)
    collectives(rank, world, dev)
    params = ddp_steps(rank, dev)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("sizes", json.dumps({"world": world, "all_reduce": N_AR * 4, "broadcast": N_BC * 4,
                                   "all_gather": N_AG * 4, "reduce_scatter": N_RS * 4, "p2p": N_P2P * 4,
                                   "ddp_grad_bytes": params * 4, "ddp_steps": STEPS}), flush=True)


def spawned_rank(rank, world, port, out_dir):
    sys.stdout = open(os.path.join(out_dir, f"rank{rank}"), "w", buffering=1)
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    print("backend", torch.cuda.get_allocator_backend(), flush=True)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=dev)
    run(rank, world, dev)


def main():
    if sys.argv[1:2] == ["spawn"]:
        out_dir, world = sys.argv[2], 2
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(spawned_rank, args=(world, port, out_dir), nprocs=world)
        for r in range(world):
            for line in open(os.path.join(out_dir, f"rank{r}")):
                print(f"{r}:{line}", end="")
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    run(rank, world, dev)


if __name__ == "__main__":
    main()
