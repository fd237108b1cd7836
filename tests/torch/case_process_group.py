# One process that creates torch's NCCL process group itself (world size 1,
# a file:// rendezvous, no launcher and no WORLD_SIZE), all-reduces and
# destroys the group (tests/torch/test_torch_backend.sh).  Under
# cudaMallocAsync torch aborts the process in the group's teardown (it asks
# the allocator for a snapshot), so the shim must leave torch's own
# allocator to it.  Prints the backend, the configuration and the result.
import os
import tempfile

import torch
import torch.distributed as dist

store = os.path.join(tempfile.mkdtemp(prefix="ts-pg-"), "store")
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1, device_id=dev)
x = torch.arange(1024, dtype=torch.float32)
y = x.to(dev)  # copied from the host: the emulator runs no torch kernel
dist.all_reduce(y)
same = torch.equal(x, y.cpu())
dist.destroy_process_group()
print("backend", torch.cuda.get_allocator_backend())
print("conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))
print("all_reduce", "ok" if same else "wrong")
