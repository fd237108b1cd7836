# Runs tests/torch/gpt_small.py (arguments passed on) and prints torch's own
# peak figures after it: what tests/bench/bench_torch_gpt.sh compares.
import runpy
import sys

import torch

path = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
torch.cuda.synchronize()
import ctypes  # noqa: E402
try:
    emu = ctypes.CDLL("libcuda.so.1")
    emu.emuGetCounter.restype = ctypes.c_uint64
    emu.emuGetCounter.argtypes = [ctypes.c_char_p]
    vmm = {n: emu.emuGetCounter(f"calls.{n}".encode()) for n in ("cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease")}
    print("vmm_calls " + " ".join(f"{k}={v}" for k, v in vmm.items()))
except (OSError, AttributeError):
    pass  # not the emulator
print(f"peak_reserved {torch.cuda.max_memory_reserved()} peak_allocated {torch.cuda.max_memory_allocated()} "
      f"backend {torch.cuda.get_allocator_backend()}")
