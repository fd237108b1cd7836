# torch's memory statistics under backend:cudaMallocAsync after a fixed
# sequence of tensor allocations and frees: memory_allocated / reserved, their
# peaks, reset_peak_memory_stats, empty_cache, memory_stats.  The shim must
# not change one "A" line (allocated bytes); "R" lines (reserved bytes) are
# each allocator's own pages, checked for their invariants
# (tests/torch/test_torch_pool_stats.sh).
import torch

assert torch.cuda.get_allocator_backend() == "cudaMallocAsync", torch.cuda.get_allocator_backend()
dev = torch.device("cuda", 0)
KEYS = ("allocated_bytes.all.current", "allocated_bytes.all.peak",
        "reserved_bytes.all.current", "reserved_bytes.all.peak")


def show(tag):
    st = torch.cuda.memory_stats(dev)
    print("A", tag, torch.cuda.memory_allocated(dev), torch.cuda.max_memory_allocated(dev),
          st.get(KEYS[0]), st.get(KEYS[1]))
    print("R", tag, torch.cuda.memory_allocated(dev), torch.cuda.memory_reserved(dev),
          torch.cuda.max_memory_reserved(dev), st.get(KEYS[2]), st.get(KEYS[3]))


show("start")
# some not a multiple of 256: the used attributes count the bytes asked for
sizes = [4 << 20, 512, 8192, (3 << 20) + 4, 100, 1 << 20, 96 << 10, 6 << 20, 2048, 24 << 20]
live = []
for i, n in enumerate(sizes):
    live.append(torch.empty(n, dtype=torch.uint8, device=dev))
    if i % 3 == 2:
        del live[0]
    show(f"alloc{i}")
torch.cuda.synchronize()
show("synced")
torch.cuda.reset_peak_memory_stats(dev)
show("reset_peak")
live = live[-2:]
show("dropped")
torch.cuda.empty_cache()
show("empty_cache")
x = torch.empty(10 << 20, dtype=torch.float32, device=dev)
y = x + 1
del x
show("after_add")
del y, live
torch.cuda.synchronize()
torch.cuda.empty_cache()
show("all_freed")
summary = torch.cuda.memory_summary(dev)
for line in summary.splitlines():
    if "Allocated memory" in line:
        print("A summary", " ".join(line.split()))
print("ok")
