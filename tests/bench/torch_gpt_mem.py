# Runs tests/torch/gpt_small.py (arguments passed on) and prints torch's own
# peak figures after it: what tests/bench/bench_torch_gpt.sh compares.
import runpy
import sys

import torch

path = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
torch.cuda.synchronize()
print(f"peak_reserved {torch.cuda.max_memory_reserved()} peak_allocated {torch.cuda.max_memory_allocated()} "
      f"backend {torch.cuda.get_allocator_backend()}")
