#!/usr/bin/env python3
"""Markdown tables and target checks from strategies_bench's CSVs (docs/results-strategies.md).

  bench/strategies_table.py --sweep docs/results-strategies-sweep.csv \
      [--speed docs/results-strategies-speed.csv] [--longest docs/results-strategies-longest.csv]

Every figure is the rank-max row of the benchmark (the rank that needs most).
"""
import argparse
import csv
from collections import defaultdict

ORDER = ["single", "tp", "tpsp", "sp", "tpxsp", "tsp"]
TITLE = {"single": "single", "tp": "TP", "tpsp": "TP-SP", "sp": "SP", "tpxsp": "TP+SP 2x2",
         "tsp": "TSP"}
MIB = 1024.0 * 1024.0


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def memory_tables(rows):
    by = defaultdict(dict)
    for r in rows:
        if r["status"] == "ok":
            by[(r["recompute"], int(r["seq"]))][r["strategy"]] = r
    for rc in sorted({k[0] for k in by}, key=lambda x: ["none", "mlp", "full"].index(x)):
        seqs = sorted(s for (c, s) in by if c == rc)
        print(f"\nPer-rank peak (MiB, rank-max), recompute {rc}:\n")
        print("| S | " + " | ".join(TITLE[s] for s in ORDER) +
              " | single/4 | TSP / (single/4) | TSP lowest? |")
        print("|---" * (len(ORDER) + 4) + "|")
        for s in seqs:
            row = by[(rc, s)]
            peaks = {k: int(v["peak_total_max"]) for k, v in row.items()}
            cells = [f"{peaks[k] / MIB:.1f}" if k in peaks else "—" for k in ORDER]
            quarter = peaks.get("single", 0) / 4
            tsp = peaks.get("tsp")
            ratio = f"{tsp / quarter:.3f}" if tsp and quarter else "—"
            others = [v for k, v in peaks.items() if k != "tsp"]
            lowest = "—" if tsp is None else ("yes" if all(tsp < o for o in others) else
                                              "no (" + ", ".join(
                                                  TITLE[k] for k, v in peaks.items()
                                                  if k != "tsp" and v <= tsp) + " lower)")
            print(f"| {s} | " + " | ".join(cells) + f" | {quarter / MIB:.1f} | {ratio} | {lowest} |")


def category_table(rows, rc, seq):
    cats = ["parameters", "gradients", "optimizer_state", "saved_activations",
            "communication_buffers", "workspace", "logits"]
    print(f"\nPeak per category (MiB, rank-max), recompute {rc}, S = {seq}:\n")
    print("| strategy | " + " | ".join(c.replace("_", " ") for c in cats) + " | peak total |")
    print("|---" * (len(cats) + 2) + "|")
    for s in ORDER:
        for r in rows:
            if r["strategy"] == s and r["recompute"] == rc and int(r["seq"]) == seq and \
                    r["status"] == "ok":
                print(f"| {TITLE[s]} | " + " | ".join(f"{int(r[c]) / MIB:.1f}" for c in cats) +
                      f" | {int(r['peak_total_max']) / MIB:.1f} |")


def speed_table(rows, label):
    by = defaultdict(dict)
    for r in rows:
        if r["status"] == "ok" and r["recompute"] == "none":
            by[int(r["seq"])][r["strategy"]] = r
    print(f"\nSpeed, recompute none ({label}): tokens per CPU-second (tokens per wall second)\n")
    print("| S | " + " | ".join(TITLE[s] for s in ORDER) + " | TSP / single per CPU-s | "
          "TSP / single per wall s |")
    print("|---" * (len(ORDER) + 3) + "|")
    for s in sorted(by):
        row = by[s]
        cells = [f"{float(row[k]['tokens_per_cpu_s']):.0f} ({float(row[k]['tokens_per_s']):.0f})"
                 if k in row else "—" for k in ORDER]
        rc = rw = "—"
        if "tsp" in row and "single" in row:
            rc = f"{float(row['tsp']['tokens_per_cpu_s']) / float(row['single']['tokens_per_cpu_s']):.2f}"
            rw = f"{float(row['tsp']['tokens_per_s']) / float(row['single']['tokens_per_s']):.2f}"
        print(f"| {s} | " + " | ".join(cells) + f" | {rc} | {rw} |")


def comm_table(rows):
    by = defaultdict(dict)
    for r in rows:
        if r["status"] == "ok" and r["recompute"] == "none":
            by[int(r["seq"])][r["strategy"]] = r
    print("\nCommunication per step, recompute none: MiB sent per rank / exposed seconds "
          "(rank-max)\n")
    print("| S | " + " | ".join(TITLE[s] for s in ORDER[1:]) + " |")
    print("|---" * len(ORDER) + "|")
    for s in sorted(by):
        row = by[s]
        cells = [f"{int(row[k]['bytes_sent']) / MIB:.1f} / {float(row[k]['exposed_s']):.2f}"
                 if k in row else "—" for k in ORDER[1:]]
        print(f"| {s} | " + " | ".join(cells) + " |")


def longest_table(rows):
    by = defaultdict(dict)
    for r in rows:
        by[r["recompute"]][r["strategy"]] = r
    caps = sorted({int(r["cap_bytes"]) for r in rows})
    print("\nLongest trainable sequence under a cap of " +
          ", ".join(f"{c / MIB:.0f} MiB" for c in caps) +
          " (one real step fits, the next grid point throws OutOfBudget):\n")
    print("| recompute | " + " | ".join(TITLE[s] for s in ORDER) +
          " | TSP/TP | TSP/TP-SP | TSP/TP+SP |")
    print("|---" * (len(ORDER) + 4) + "|")
    for rc in [c for c in ["none", "mlp", "full"] if c in by]:
        row = by[rc]
        n = {k: int(v["longest_seq"]) for k, v in row.items()}
        cells = [str(n[k]) if k in n else "—" for k in ORDER]

        def ratio(a, b):
            if a not in n or b not in n:
                return "—"
            if n[b] == 0:
                return "∞ (nothing fits)" if n[a] > 0 else "— (neither fits)"
            return f"{n[a] / n[b]:.2f}"
        print(f"| {rc} | " + " | ".join(cells) +
              f" | {ratio('tsp', 'tp')} | {ratio('tsp', 'tpsp')} | {ratio('tsp', 'tpxsp')} |")
    print("\nAt the longest sequence: peak per category (MiB, rank-max), and what failed at the "
          "next grid point:\n")
    cats = ["parameters", "gradients", "optimizer_state", "saved_activations",
            "communication_buffers", "workspace", "logits"]
    print("| recompute | strategy | S | " + " | ".join(c.replace("_", " ") for c in cats) +
          " | total | probes | next grid point |")
    print("|---" * (len(cats) + 6) + "|")
    for rc in [c for c in ["none", "mlp", "full"] if c in by]:
        for s in ORDER:
            if s not in by[rc]:
                continue
            r = by[rc][s]
            fail = r["failure"]
            i = fail.find("allocating")
            fail = fail[i:fail.find(";")] if i >= 0 else fail
            print(f"| {rc} | {TITLE[s]} | {r['longest_seq']} | " +
                  " | ".join(f"{int(r[c]) / MIB:.1f}" for c in cats) +
                  f" | {int(r['peak_total_at_longest']) / MIB:.1f} | {r['probes']} | "
                  f"S={r['first_failing_seq']}: {fail} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep")
    ap.add_argument("--speed", help="a later speed-only sweep (recompute none)")
    ap.add_argument("--longest")
    a = ap.parse_args()
    if a.sweep:
        rows = read(a.sweep)
        memory_tables(rows)
        top = max(int(r["seq"]) for r in rows)
        for rc in sorted({r["recompute"] for r in rows}):
            category_table(rows, rc, top)
        speed_table(rows, "first run, " + a.sweep)
        comm_table(rows)
    if a.speed:
        speed_table(read(a.speed), "second run, " + a.speed)
    if a.longest:
        longest_table(read(a.longest))


if __name__ == "__main__":
    main()
