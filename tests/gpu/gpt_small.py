"""A deterministic small GPT (make gpu-check): a few training steps on
synthetic tokens, run with and without the shim; the loss sequences must be
identical.  Prints "step N loss X LOSSHEX" per step and a summary line with the
mean step time (after two warm-up steps) and torch's memory peaks.

Determinism: fixed seeds, deterministic algorithms, no TF32, and the data
generated on the host and copied from pageable memory (the shim converts
those copies), so the only difference between the runs is the shim."""
import os
import sys
import time

import torch

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch.manual_seed(1234)
torch.use_deterministic_algorithms(True, warn_only=True)   # a nondeterministic op shows as differing losses
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
V, T, D, H, L, BATCH = 4096, 256, 512, 8, 4, 16
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / (D // H) ** 0.5
        att = att.masked_fill(torch.triu(torch.ones(t, t, device=x.device, dtype=torch.bool), 1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(V, D), torch.nn.Embedding(T, D)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(L))
        self.ln, self.head = torch.nn.LayerNorm(D), torch.nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
gen = torch.Generator().manual_seed(99)
times = []
for step in range(STEPS):
    batch = torch.randint(0, V, (BATCH, T + 1), generator=gen)   # pageable host memory
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    x, y = batch[:, :-1].to(dev), batch[:, 1:].to(dev)
    loss = torch.nn.functional.cross_entropy(model(x).view(-1, V), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    val = loss.item()
    times.append(time.perf_counter() - t0)
    print("step %d loss %.6f %s" % (step, val, float(val).hex()), flush=True)
steady = times[2:] or times
print("summary step_ms=%.3f max_reserved=%d max_allocated=%d steps=%d" % (
    1e3 * sum(steady) / len(steady), torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated(), STEPS))
