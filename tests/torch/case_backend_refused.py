# What torch refuses under backend:cudaMallocAsync besides memory history
# (tests/torch/test_torch_backend.sh): sharing a CUDA tensor with another
# process (what a torch.multiprocessing queue does with one:
# shareIpcHandle), the allocator checkpoint that torch.compile's CUDA graph
# trees take at every recording (mode="reduce-overhead", or "max-autotune",
# which turns CUDA graphs on: getCheckpointState) and a torch.cuda.MemPool
# (createOrIncrefPool).  Run as this file, the shim reads these words and
# leaves torch's own allocator; the test also feeds each section alone
# through `python -c`.  Prints the backend, the configuration torch read,
# and for the section named in argv[1] (or all) "NAME refused" when torch
# raised its cudaMallocAsync refusal, else "NAME reached" (the call got past
# the allocator: on the emulator the IPC event handle it asks next is
# unsupported, which is the emulator's limit, not the allocator's).
import os
import sys

import torch


def share(x):
    import torch.multiprocessing  # noqa: F401  (the queue's reduction: _share_cuda_)
    x.untyped_storage()._share_cuda_()


def checkpoint(x):
    # torch.compile(model, mode="reduce-overhead") records through graph trees, which checkpoint the pool
    torch._C._cuda_getCheckpointState(x.device.index, torch.cuda.graph_pool_handle())


def mempool(x):
    with torch.cuda.use_mem_pool(torch.cuda.MemPool()):
        torch.empty(16, device=x.device)


print("backend", torch._C._cuda_getAllocatorBackend())
print("conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))
x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
for name in ("share", "checkpoint", "mempool"):
    fn = globals().get(name)  # the test runs each section alone
    if fn is None or (len(sys.argv) > 1 and sys.argv[1] != name):
        continue
    try:
        fn(x)
        print(name, "reached")
    except Exception as ex:  # noqa: BLE001  (which error is the point)
        print(name, "refused" if "does not yet support" in str(ex) else "reached")
