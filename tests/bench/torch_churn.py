# torch.empty / del of mixed sizes on one stream: CPU time per tensor (the
# allocator's cost as torch's own code sees it).
#
#   torch_churn.py            best of 20 short rounds, one line
#   torch_churn.py --serve    warm up, print "ready <backend>", then run one
#                             round per "round N W" line read from stdin: W
#                             iterations (two tensors each) untimed, to warm
#                             the caches another process used meanwhile,
#                             then N timed; answers "<thread ns> <process ns>"
#                             per tensor of the timed part; ends at EOF.
#                             tests/bench/bench_torch_churn.sh drives several
#                             of these in turn, round by round.
import sys
import time

import torch

sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 256, 12288, 8 << 20]
dev = torch.device("cuda", 0)


def churn(iterations):
    """Thread and process CPU ns per tensor of one round."""
    t0, p0 = time.thread_time_ns(), time.process_time_ns()
    for i in range(iterations):
        a = torch.empty(sizes[i & 7], dtype=torch.uint8, device=dev)
        b = torch.empty(sizes[(i + 3) & 7], dtype=torch.uint8, device=dev)
        del a, b
    t1, p1 = time.thread_time_ns(), time.process_time_ns()
    return (t1 - t0) / (2 * iterations), (p1 - p0) / (2 * iterations)


for n in sizes * 50:  # warm: pools, caches
    torch.empty(n, dtype=torch.uint8, device=dev)
churn(2000)
backend = torch.cuda.get_allocator_backend()
if sys.argv[1:] == ["--serve"]:
    print(f"ready {backend}", flush=True)
    for line in sys.stdin:
        word, count, warm = line.split()
        assert word == "round"
        if int(warm):
            churn(int(warm))
        thread_ns, process_ns = churn(int(count))
        print(f"{thread_ns:.1f} {process_ns:.1f}", flush=True)
    sys.exit(0)
best = min(churn(5000)[1] for _ in range(20))
print(f"churn {best:.0f} ns/tensor backend {backend}")
