"""The small GPT of gpt_small.py trained with or without activation
checkpointing of every block (torch.utils.checkpoint, non-reentrant): with
it, each block's forward runs again inside the backward.  Run it in skip mode
(EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip) like gpt_small.py: the losses
mean nothing, the GEMM shapes are the real ones.

Usage: case_checkpoint.py checkpoint|plain.  Prints "dims {json}", each
step's loss and "done"."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from gpt_small import GPT

STEPS, BATCH, SEQ, LAYERS, DIM, HEADS, VOCAB = 4, 4, 64, 2, 128, 4, 640


def forward(model, idx, ckpt):
    t = idx.shape[1]
    x = model.tok(idx) + model.pos(torch.arange(t, device=idx.device))
    for blk in model.blocks:
        x = checkpoint(blk, x, use_reentrant=False) if ckpt else blk(x)
    return model.head(model.ln(x))


def main():
    ckpt = sys.argv[1] == "checkpoint"
    torch.manual_seed(0)
    model = GPT(VOCAB, DIM, HEADS, LAYERS, SEQ).to("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(1)
    print("dims", json.dumps({"steps": STEPS, "batch": BATCH, "seq": SEQ, "layers": LAYERS, "dim": DIM,
                              "vocab": VOCAB}), flush=True)
    for step in range(STEPS):
        tokens = torch.randint(VOCAB, (BATCH, SEQ + 1), generator=g)
        x, y = tokens[:, :-1].to("cuda"), tokens[:, 1:].to("cuda")
        loss = F.cross_entropy(forward(model, x, ckpt).view(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    print("done")


if __name__ == "__main__":
    main()
