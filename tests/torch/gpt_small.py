"""A small GPT trained for a few steps: token and position embeddings,
causal self-attention written with matmul, a GELU MLP, LayerNorm, AdamW and
cross-entropy.  On the CUDA emulator it runs in skip mode
(EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip): torch's own kernels and the
GEMMs' arithmetic are skipped, so the losses it prints mean nothing, while
every allocation, copy, GEMM shape and its FLOPs are the real ones.

Usage: gpt_small.py [--steps N] [--batch B] [--seq T] [--layers L]
                    [--dim C] [--heads H] [--vocab V] [--device D]
Prints "dims {json}" (what it trained), each step's loss and "done"."""
import argparse
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.register_buffer("causal", torch.ones(seq, seq).tril().bool().logical_not(), persistent=False)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (b, heads, t, head_dim)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        scores = scores.masked_fill(self.causal[:t, :t], float("-inf"))
        y = torch.matmul(scores.softmax(dim=-1), v)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, seq) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def vmm_counter():
    """A function returning the emulator's VMM call count so far, or None."""
    import ctypes
    try:
        emu = ctypes.CDLL("libcuda.so.1")
        get = emu.emuGetCounter
    except (OSError, AttributeError):
        return None
    get.restype = ctypes.c_uint64
    get.argtypes = [ctypes.c_char_p]
    names = [f"calls.cuMem{n}".encode() for n in ("Create", "Map", "Unmap", "Release", "SetAccess")]
    return lambda: sum(get(n) for n in names)


def evaluate(model, a, g):
    """An evaluation pass as training scripts make one between steps: no
    gradients, batches of another shape (twice the batch, half the length),
    the loss read back."""
    model.eval()
    with torch.no_grad():
        for _ in range(2):
            tokens = torch.randint(a.vocab, (2 * a.batch, a.seq // 2 + 1), generator=g)
            x, y = tokens[:, :-1].to(a.device), tokens[:, 1:].to(a.device)
            loss = F.cross_entropy(model(x).view(-1, a.vocab), y.reshape(-1))
            print(f"eval loss {loss.item():.4f}", flush=True)
    model.train()


def main():
    p = argparse.ArgumentParser()
    for name, default in (("steps", 3), ("batch", 4), ("seq", 64), ("layers", 2), ("dim", 128),
                          ("heads", 4), ("vocab", 512)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--device", default="cuda")
    p.add_argument("--random-seq", type=int, default=0)
    p.add_argument("--length-seed", type=int, default=2, help="the random lengths' generator seed")
    p.add_argument("--vmm-calls", action="store_true")
    p.add_argument("--eval-every", type=int, default=0, help="an evaluation pass after every N steps")
    a = p.parse_args()
    vmm = vmm_counter() if a.vmm_calls else None
    assert a.dim % a.heads == 0
    torch.manual_seed(0)
    model = GPT(a.vocab, a.dim, a.heads, a.layers, a.seq).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    dims = {k: getattr(a, k) for k in ("steps", "batch", "seq", "layers", "dim", "heads", "vocab")}
    dims["params"] = sum(q.numel() for q in model.parameters())
    print("dims", json.dumps(dims), flush=True)
    if a.device.startswith("cuda"):
        print("backend", torch.cuda.get_allocator_backend(), flush=True)
    lengths = torch.Generator().manual_seed(a.length_seed)
    for step in range(a.steps):
        t = a.seq
        if a.random_seq:
            t = int(torch.randint(a.random_seq, a.seq + 1, (1,), generator=lengths))
        calls0 = vmm() if vmm else 0
        tokens = torch.randint(a.vocab, (a.batch, t + 1), generator=g)
        x, y = tokens[:, :-1].to(a.device), tokens[:, 1:].to(a.device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        if a.eval_every and step % a.eval_every == a.eval_every - 1:
            evaluate(model, a, g)
        if vmm:
            print(f"vmm step {step} {vmm() - calls0}", flush=True)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
        print(f"peak allocated {torch.cuda.max_memory_allocated()} bytes")
    print("done")


if __name__ == "__main__":
    main()
