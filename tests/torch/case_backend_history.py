# A script that records torch's memory history and takes a snapshot, as
# torch's memory_viz recipe writes it (tests/torch/test_torch_backend.sh):
# torch refuses both under backend:cudaMallocAsync, so the shim must leave
# torch's own allocator to it.  Prints the backend and what the snapshot held
# (the backend read through torch._C: the shim takes a script that asks
# torch.cuda for its allocator backend to guard its history calls itself).
import os
import torch

torch.cuda.memory._record_memory_history(max_entries=1000)
x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
del x
print("backend", torch._C._cuda_getAllocatorBackend())
print("conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))
print("snapshot allocs", sum(1 for e in snap["device_traces"][0] if e["action"] == "alloc"))
