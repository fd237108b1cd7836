"""torch.cuda.memory._record_memory_history() and _snapshot(): allocates and
frees tensors of known sizes, then checks the snapshot holds them (trace
events with their sizes, segments adding up to what torch reserved) and
prints an address-free summary of it for the with/without-shim comparison."""
import pickle
import sys

import torch

SIZES = [1 << 10, 3 << 20, 123 * 4, 8 << 20, 1 << 16]  # bytes, float32 tensors


def main():
    out = sys.argv[1]
    torch.cuda.memory._record_memory_history(max_entries=10000)
    g = torch.Generator().manual_seed(5)
    keep = []
    for i, nbytes in enumerate(SIZES):
        t = torch.randn(nbytes // 4, generator=g).to("cuda")
        if i % 2 == 0:
            keep.append(t)
        del t
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(out, "wb") as f:
        pickle.dump(snap, f)

    segs = snap["segments"]
    assert segs, "snapshot without segments"
    total = sum(s["total_size"] for s in segs)
    assert total == torch.cuda.memory_reserved(), (total, torch.cuda.memory_reserved())
    live = sorted(b["requested_size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated")
    want_live = sorted(SIZES[i] for i in range(0, len(SIZES), 2))
    assert live == want_live, (live, want_live)
    trace = [e for dev in snap["device_traces"] for e in dev]
    allocs = [e["size"] for e in trace if e["action"] == "alloc"]
    frees = [e["size"] for e in trace if e["action"] in ("free_requested", "free_completed")]
    assert allocs == SIZES, (allocs, SIZES)
    assert len(frees) >= len(SIZES) // 2, frees
    assert all(e.get("frames") for e in trace if e["action"] == "alloc"), "allocations without their stacks"
    print("segments", sorted((s["total_size"], s["segment_type"]) for s in segs))
    print("live", live)
    print("trace", [(e["action"], e["size"]) for e in trace])
    print("frees", len(frees))
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
