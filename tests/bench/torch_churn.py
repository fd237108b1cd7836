# torch.empty / del of mixed sizes on one stream: CPU time per tensor (the
# allocator's cost as torch's own code sees it).  Best of 20 short rounds:
# on a shared machine a short round is more likely to run undisturbed.
import time

import torch

sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 256, 12288, 8 << 20]
dev = torch.device("cuda", 0)
for n in sizes * 50:  # warm: pools, caches
    torch.empty(n, dtype=torch.uint8, device=dev)
best = None
per_round = 5000
for _ in range(20):
    t0 = time.process_time_ns()
    for i in range(per_round):
        a = torch.empty(sizes[i & 7], dtype=torch.uint8, device=dev)
        b = torch.empty(sizes[(i + 3) & 7], dtype=torch.uint8, device=dev)
        del a, b
    ns = (time.process_time_ns() - t0) / (2 * per_round)
    best = ns if best is None else min(best, ns)
print(f"churn {best:.0f} ns/tensor backend {torch.cuda.get_allocator_backend()}")
