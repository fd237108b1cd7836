"""DataLoader with two worker processes and pin_memory: the batches the
workers build reach the device through pinned buffers (torch's pin-memory
thread), and a GEMM per batch accumulates X^T X on the device.  Prints each
batch's digest and the accumulated Gram matrix's; checks it against the CPU."""
import hashlib
import sys

import torch
from torch.utils.data import DataLoader, Dataset

ROWS, COLS, BATCH = 512, 40, 64


class Rows(Dataset):
    def __len__(self):
        return ROWS

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(1000 + i)
        return torch.randn(COLS, generator=g), i


def digest(t):
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]


def main():
    loader = DataLoader(Rows(), batch_size=BATCH, num_workers=2, pin_memory=True, shuffle=False)
    gram = torch.zeros(COLS, COLS).to("cuda")
    ref = torch.zeros(COLS, COLS, dtype=torch.float64)
    seen = []
    for k, (x, idx) in enumerate(loader):
        assert x.is_pinned(), "DataLoader(pin_memory=True) gave an unpinned batch"
        dx = x.to("cuda", non_blocking=True)
        gram = torch.addmm(gram, dx.t(), dx)
        ref += x.double().t() @ x.double()
        seen += idx.tolist()
        print(f"batch {k} rows {idx[0].item()}..{idx[-1].item()} {digest(x)}")
    assert seen == list(range(ROWS)), "rows lost or reordered"
    out = gram.cpu()
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-3)
    print(f"gram {digest(out)}")
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
