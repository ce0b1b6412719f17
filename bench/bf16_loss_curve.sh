#!/usr/bin/env bash
# The default job's loss curve in fp32 and in bf16 on one device (issue 17's "within 2 % over
# 120 steps"): runs both, writes docs/results-bf16-loss.csv (step, fp32 loss, bf16 loss,
# relative difference) and plots it to docs/plots/bf16_loss.png.
# Usage: bash bench/bf16_loss_curve.sh [build dir] [threads]
set -euo pipefail
build=${1:-build}
threads=${2:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in fp32 bf16; do
  "$build/origami" train --strategy single --threads "$threads" --precision "$p" \
    --metrics "$work/$p.jsonl" > "$work/$p.log"
done
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
runs = {p: [json.loads(l) for l in open(f"{work}/{p}.jsonl") if l.strip()] for p in ("fp32", "bf16")}
with open("docs/results-bf16-loss.csv", "w") as out:
    out.write("step,fp32_loss,bf16_loss,relative_difference\n")
    for f, b in zip(runs["fp32"], runs["bf16"]):
        out.write(f"{f['step']},{f['loss']:.6f},{b['loss']:.6f},{(b['loss'] - f['loss']) / f['loss']:.5f}\n")
PY
gnuplot bench/plot_bf16_loss.gp
echo "wrote docs/results-bf16-loss.csv and docs/plots/bf16_loss.png"
