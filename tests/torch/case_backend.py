# Prints torch's allocator backend and the configuration it read
# (tests/torch/test_torch_backend.sh).
import os
import torch

x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
del x
print("backend", torch.cuda.get_allocator_backend())
print("conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))
