#!/usr/bin/python3
"""Does a small Llama learn the built-in corpus? (A check of the corpus, not of Origami.)

Trains the oracle's model (llama_oracle.forward_loss, here in float32 for speed) with h 64,
2 layers, 4 heads over 2 KV heads, intermediate 160, vocabulary 256, on random windows of the
text embedded in src/origami/train/default_corpus.cpp, with AdamW lr 3e-3, B 8, S 128, one
thread, and prints the loss every 50 steps.

  /usr/bin/python3 tests/oracle/corpus_check.py [steps=400]
"""
import os
import re
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_oracle as lo  # noqa: E402


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    with open(os.path.join(HERE, "..", "..", "src", "origami", "train", "default_corpus.cpp")) as f:
        text = re.search(r'R"\((.*)\)";', f.read(), re.S).group(1).encode()
    data = torch.tensor(list(text), dtype=torch.long)
    print("corpus bytes", len(data))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = lo.check_config({"vocab_size": 256, "hidden_size": 64, "intermediate_size": 160,
                           "num_hidden_layers": 2, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "rms_norm_eps": 1e-5})
    params = {n: (torch.randn(s) * 0.02 if len(s) == 2 else torch.ones(s)).requires_grad_(True)
              for n, s in lo.parameter_shapes(cfg).items()}
    lo.F64 = torch.float32  # the oracle's RoPE tables follow this dtype
    opt = torch.optim.AdamW(params.values(), lr=3e-3, weight_decay=0.0)
    B, S = 8, 128
    t0 = time.time()
    for step in range(steps):
        starts = torch.randint(0, len(data) - S - 1, (B,)).tolist()
        w = torch.stack([data[s:s + S + 1] for s in starts])
        loss = lo.forward_loss(params, cfg, w[:, :-1], w[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(step, round(loss.item(), 3), f"{time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
