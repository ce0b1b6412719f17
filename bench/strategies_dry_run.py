#!/usr/bin/env python3
"""Per-rank peak memory of every strategy at D = 4 over S, and the longest sequence each fits
under a per-rank cap, on the h 1024 model of the strategies benchmark -- from the engine's dry
run (`origami train --dry-run`: the real schedules, memory tracked but not backed, equal to a
real run's per category; docs/dry-run.md). Seconds instead of hours on this machine.

  bench/strategies_dry_run.py sweep   [--origami build/origami]
  bench/strategies_dry_run.py longest [--origami build/origami] [--caps 1024,2048,4096]
"""
import argparse, json, os, subprocess, tempfile

MODEL = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
         "intermediate_size": 2816, "num_hidden_layers": 8, "num_attention_heads": 16,
         "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 65536,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
         "tie_word_embeddings": False}
STRATEGIES = {"single": ["--strategy", "single"], "TP": ["--strategy", "tp", "--degree", "4"],
              "TP-SP": ["--strategy", "tpsp", "--degree", "4"],
              "SP": ["--strategy", "sp", "--degree", "4"],
              "TP+SP 2x2": ["--strategy", "tp", "--mesh", "tp=2,sp=2"],
              "TSP": ["--strategy", "tsp", "--degree", "4"]}
MIB = 2 ** 20


def peak(args, tmp, name, seq, recompute):
    """The rank-max peak bytes per category of one dry-run step, or None if refused."""
    out = os.path.join(tmp, "report.json")
    cmd = [args.origami, "train", "--dry-run", "--config", os.path.join(tmp, "config.json"),
           "--seq", str(seq), "--batch", "1", "--recompute", recompute, "--json", out]
    if subprocess.run(cmd + STRATEGIES[name], capture_output=True).returncode != 0:
        return None
    ranks = json.load(open(out))["ranks"]
    return max((r["peak_bytes"] for r in ranks), key=lambda p: p["total"])


def sweep(args, tmp):
    for rec in ("none", "full"):
        print(f"\nrecompute {rec}: per-rank peak total (MiB, rank-max)\n")
        print("| S | " + " | ".join(STRATEGIES) + " | single/4 | TSP / (single/4) | TSP lowest |")
        print("|" + "---|" * (len(STRATEGIES) + 4))
        for seq in (1024, 2048, 4096, 8192, 16384, 32768):
            tot = {n: peak(args, tmp, n, seq, rec)["total"] / MIB for n in STRATEGIES}
            quarter = tot["single"] / 4
            lowest = all(tot["TSP"] <= v for n, v in tot.items() if n not in ("TSP", "single"))
            print(f"| {seq} | " + " | ".join(f"{tot[n]:.1f}" for n in STRATEGIES) +
                  f" | {quarter:.1f} | {tot['TSP'] / quarter:.3f} | {'yes' if lowest else 'no'} |")


def longest(args, tmp):
    grid = 64  # tokens: a multiple of 2D (zigzag) and of tp (TP-SP's rows)
    for cap in (int(c) for c in args.caps.split(",")):
        print(f"\ncap {cap} MiB per rank: longest S (grid {grid}) whose peak fits\n")
        print("| recompute | " + " | ".join(STRATEGIES) + " | TSP/TP | TSP/TP-SP | TSP/TP+SP |")
        print("|" + "---|" * (len(STRATEGIES) + 4))
        for rec in ("none", "full"):
            best = {}
            for n in STRATEGIES:
                def fits(k):
                    p = peak(args, tmp, n, k * grid, rec)
                    return p is not None and p["total"] <= cap * MIB
                if not fits(1):
                    best[n] = 0
                    continue
                lo, hi = 1, 2
                while fits(hi):
                    lo, hi = hi, hi * 2
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if fits(mid) else (lo, mid)
                best[n] = lo * grid
            ratio = lambda a, b: f"{best[a] / best[b]:.2f}" if best[b] else "—"
            print(f"| {rec} | " + " | ".join(str(best[n]) for n in STRATEGIES) +
                  f" | {ratio('TSP', 'TP')} | {ratio('TSP', 'TP-SP')} | {ratio('TSP', 'TP+SP 2x2')} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["sweep", "longest"])
    p.add_argument("--origami", default="build/origami")
    p.add_argument("--caps", default="1024,2048,4096", help="per-rank caps in MiB")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        json.dump(MODEL, open(os.path.join(tmp, "config.json"), "w"))
        (sweep if args.mode == "sweep" else longest)(args, tmp)


if __name__ == "__main__":
    main()
