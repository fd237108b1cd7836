"""A two-layer linear model trained by SGD where every device operation is a
GEMM or a copy (no torch kernel runs, so the emulator computes it exactly
as a GPU would, in float32):

    H = X W1,  P = H W2,  R = P - Y          (R by addmm with beta = -1)
    loss = |R|^2 / N                           (R.R as a 1 x 1 GEMM)
    W2 <- W2 - lr 2/N H^T R                    (addmm into W2)
    dH = R W2^T,  W1 <- W1 - lr 2/N X^T dH     (old W2, as autograd would)

Usage: case_gemm_train.py cuda|cpu OUT.pt.  Prints every step's loss and the
weights' checksum, and saves the final weights to OUT.pt."""
import hashlib
import json
import os
import sys

import torch

N, D, HID, O = 256, 64, 48, 16
STEPS, LR = 12, 0.05
# GEMM_TRAIN_DIMS=N,D,HID,O,STEPS: a larger job (the offload test needs one
# whose tensors span many 2 MiB pages)
if os.environ.get("GEMM_TRAIN_DIMS"):
    N, D, HID, O, STEPS = (int(v) for v in os.environ["GEMM_TRAIN_DIMS"].split(","))


def data():
    g = torch.Generator().manual_seed(42)
    x = torch.randn(N, D, generator=g)
    true_w = torch.randn(D, O, generator=g) / D**0.5
    y = x @ true_w
    w1 = torch.randn(D, HID, generator=g) / D**0.5
    w2 = torch.randn(HID, O, generator=g) / HID**0.5
    return x, y, w1, w2


def train(dev):
    x, y, w1, w2 = (t.to(dev) for t in data())
    scale = -LR * 2.0 / N
    losses = []
    for _ in range(STEPS):
        h = torch.mm(x, w1)
        r = torch.addmm(y, h, w2, beta=-1.0, alpha=1.0)  # P - Y
        flat = r.view(1, -1)
        losses.append(torch.mm(flat, flat.t()).item() / N)
        dh = torch.mm(r, w2.t())
        w2 = torch.addmm(w2, h.t(), r, alpha=scale)
        w1 = torch.addmm(w1, x.t(), dh, alpha=scale)
    return losses, w1.cpu(), w2.cpu()


def main():
    dev, out = sys.argv[1], sys.argv[2]
    losses, w1, w2 = train(dev)
    print("dims", json.dumps({"N": N, "D": D, "HID": HID, "O": O, "STEPS": STEPS}))
    for i, l in enumerate(losses):
        print(f"step {i} loss {l!r}")
    assert losses[-1] < 0.5 * losses[0], f"loss did not decrease: {losses[0]} -> {losses[-1]}"
    h = hashlib.sha256(w1.numpy().tobytes() + w2.numpy().tobytes()).hexdigest()[:16]
    print(f"weights sha256 {h} sum {w1.double().sum().item() + w2.double().sum().item()!r}")
    torch.save({"w1": w1, "w2": w2, "losses": torch.tensor(losses, dtype=torch.float64)}, out)


if __name__ == "__main__":
    main()
