"""Fragments torch's caching allocator on a small device (run it with
EMU_DEVICE_MEMORY=512M): fifteen 30 MiB tensors (one 30 MiB segment each
under the native allocator), every other one freed (8 x 30 MiB cached with
no tensor in them), then one 100 MiB tensor, which no cached block holds and
the device's free memory cannot add: the native allocator's cudaMalloc
fails, it releases cached segments and retries.  "fits" stops before that
allocation.  Every tensor is copied from the host and read back, so the
printed values say whether the memory was right.

Usage: case_fragment.py fragment|fits.  Prints the values, then torch's own
allocator figures under the native backend: its retries after a failed
cudaMalloc, the bytes of segments it freed, and its peak reserved bytes."""
import sys

import torch

MiB = 1 << 20


def main():
    mode = sys.argv[1]
    keep = [torch.full((30 * MiB // 4,), float(i)).to("cuda") for i in range(15)]
    for i in range(0, 15, 2):
        keep[i] = None
    print("kept", [t[-2:].cpu().tolist() for t in keep if t is not None])
    if mode == "fragment":
        big = torch.full((100 * MiB // 4,), 2.5).to("cuda")
        print("big", big[-2:].cpu().tolist())
    backend = torch.cuda.get_allocator_backend()
    print("backend", backend)
    if backend == "native":
        s = torch.cuda.memory_stats()
        print("torch", s["num_alloc_retries"], s["reserved_bytes.all.freed"], s["reserved_bytes.all.peak"])


if __name__ == "__main__":
    main()
