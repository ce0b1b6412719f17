#!/usr/bin/python3
"""Times full training steps of the same Llama model in PyTorch (float32), for the side-by-side
comparison with Origami (bench/compare_pytorch.sh). Plain torch ops; attention is the usual
softmax(QK^T)V with a causal mask (this Debian torch, 1.13, has no fused CPU attention).
Prints one JSON line like bench/train_step_bench."""
import argparse, json, math, resource, time
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--batch", type=int, default=1)
p.add_argument("--steps", type=int, default=5)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--intermediate", type=int, default=688)
p.add_argument("--vocab", type=int, default=256)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
h, H, f, V, S, B = a.hidden, a.heads, a.intermediate, a.vocab, a.seq, a.batch
d = h // H


def lin(o, i):
    return torch.nn.Parameter(torch.randn(o, i) * 0.02)


params = {"embed": lin(V, h), "head": lin(V, h), "norm": torch.nn.Parameter(torch.ones(h))}
for l in range(a.layers):
    for n, shape in [("q", (h, h)), ("k", (h, h)), ("v", (h, h)), ("o", (h, h)),
                     ("g", (f, h)), ("u", (f, h)), ("d", (h, f))]:
        params[f"{l}.{n}"] = lin(*shape)
    params[f"{l}.n1"] = torch.nn.Parameter(torch.ones(h))
    params[f"{l}.n2"] = torch.nn.Parameter(torch.ones(h))

inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
cos = torch.cat([ang.cos(), ang.cos()], -1).float()
sin = torch.cat([ang.sin(), ang.sin()], -1).float()
mask = torch.full((S, S), float("-inf")).triu(1)


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def rope(x):  # [B, H, S, d]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def forward(ids, labels):
    x = params["embed"][ids]
    for l in range(a.layers):
        n = rms(x, params[f"{l}.n1"])
        q = rope((n @ params[f"{l}.q"].T).view(B, S, H, d).transpose(1, 2))
        k = rope((n @ params[f"{l}.k"].T).view(B, S, H, d).transpose(1, 2))
        v = (n @ params[f"{l}.v"].T).view(B, S, H, d).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + mask, -1)
        o = (att @ v).transpose(1, 2).reshape(B, S, h)
        x = x + o @ params[f"{l}.o"].T
        n = rms(x, params[f"{l}.n2"])
        x = x + (F.silu(n @ params[f"{l}.g"].T) * (n @ params[f"{l}.u"].T)) @ params[f"{l}.d"].T
    logits = rms(x, params["norm"]) @ params["head"].T
    return F.cross_entropy(logits.view(-1, V), labels.view(-1))


opt = torch.optim.AdamW(params.values(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
ids = torch.randint(0, V, (B, S))
labels = torch.randint(0, V, (B, S))


def step():
    opt.zero_grad(set_to_none=True)
    forward(ids, labels).backward()
    torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
    opt.step()


step()  # warm-up
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(a.steps):
    step()
sec, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"impl": "pytorch", "seq": S, "batch": B, "threads": a.threads,
                  "tokens_per_s": B * S * a.steps / sec, "step_seconds": sec / a.steps,
                  "tokens_per_cpu_s": B * S * a.steps / cpu,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
