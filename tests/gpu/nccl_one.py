"""all_reduce through the real NCCL on one GPU (world size 1), for make
gpu-check: torch.distributed's nccl backend, so the NCCL is the one torch's
wheel ships.  Prints "allreduce calls=N bytes=B correct=yes|no"."""
import os
import tempfile

import torch
import torch.distributed as dist

store = tempfile.mktemp(prefix="gpucheck-nccl-")
torch.cuda.set_device(0)
try:   # device_id: the communicator is created now (torch >= 2.3)
    dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
except TypeError:
    dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
calls, n = 20, 16 << 20
x = torch.arange(n // 4, dtype=torch.float32, device="cuda")
ok = True
for i in range(calls):
    y = x.clone()
    dist.all_reduce(y)
    ok = ok and torch.equal(y, x)
torch.cuda.synchronize()
dist.destroy_process_group()
try:
    os.unlink(store)
except OSError:
    pass
print("allreduce calls=%d bytes=%d correct=%s" % (calls, n, "yes" if ok else "no"))
