# Generates the golden values of AdamW.MatchesTorchGoldenValues (optimizer_test.cpp):
#   /usr/bin/python3 tests/kernels/adamw_golden.py
import math, torch
torch.set_printoptions(precision=10)
n = 7
p0 = torch.tensor([0.1 * (i + 1) - 0.3 for i in range(n)], dtype=torch.float64).float()
p = torch.nn.Parameter(p0.clone())
opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
for t in range(1, 4):
    g = torch.tensor([math.sin(i + 3.0 * t) * (10.0 ** -(i % 4)) for i in range(n)], dtype=torch.float64).float()
    p.grad = g
    opt.step()
st = opt.state[p]
fmt = lambda v: ", ".join(f"{x:.9e}f" for x in v.tolist())
print("p:", fmt(p.detach()))
print("m:", fmt(st["exp_avg"]))
print("v:", fmt(st["exp_avg_sq"]))
print(torch.__version__)
