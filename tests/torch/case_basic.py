"""Device query, copies and one GEMM, using only what the emulator runs
without skip modes: copies (pageable, pinned, device to device) and cuBLAS.
Prints what it saw; the test runs it with and without the shim under each
allocator setup and demands the same output.  Checks its own results
against the CPU (exact for copies, float tolerance for the GEMM)."""
import hashlib
import sys

import torch


def digest(t):
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]


def main():
    assert torch.cuda.is_available(), "torch sees no CUDA device"
    n = torch.cuda.device_count()
    props = torch.cuda.get_device_properties(0)
    print(f"devices {n} allocator {torch.cuda.get_allocator_backend()}")
    print(f"name {props.name} cc {props.major}.{props.minor} sms {props.multi_processor_count}")
    print(f"total_memory {props.total_memory}")
    free, total = torch.cuda.mem_get_info()
    assert 0 < free <= total == props.total_memory, (free, total, props.total_memory)

    g = torch.Generator().manual_seed(1234)
    a = torch.randn(192, 160, generator=g)
    b = torch.randn(160, 96, generator=g)
    bias = torch.randn(192, 96, generator=g)

    # pageable host -> device -> host
    da = a.to("cuda")
    assert torch.equal(da.cpu(), a), "pageable round trip changed the data"
    # pinned host -> device (asynchronous), then device -> pinned host
    pb = b.pin_memory()
    assert pb.is_pinned() and not b.is_pinned()
    db = pb.to("cuda", non_blocking=True)
    back = torch.empty_like(b).pin_memory()
    back.copy_(db, non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(back, b), "pinned round trip changed the data"
    # device -> device (contiguous, same dtype: a memcpy, no kernel)
    dc = da.clone()
    assert torch.equal(dc.cpu(), a)

    # one GEMM and one addmm (cuBLAS / cuBLASLt)
    dm = torch.mm(da, db)
    dbias = bias.to("cuda")
    dam = torch.addmm(dbias, da, db, beta=0.5, alpha=2.0)
    m, am = dm.cpu(), dam.cpu()
    ref_m, ref_am = torch.mm(a, b), torch.addmm(bias, a, b, beta=0.5, alpha=2.0)
    torch.testing.assert_close(m, ref_m, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(am, ref_am, rtol=1e-4, atol=1e-4)
    print(f"copies {digest(a)} {digest(b)} gemm {digest(m)} addmm {digest(am)}")

    # the caching allocator's own accounting of what the script holds
    print(f"allocated {torch.cuda.memory_allocated()}")
    del da, db, dc, dm, dam, dbias
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    print(f"allocated_after_free {torch.cuda.memory_allocated()}")
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
