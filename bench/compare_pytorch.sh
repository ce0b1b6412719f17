#!/usr/bin/env bash
# Side by side: a full training step (forward, backward, clipping, AdamW) of Origami and of
# the same model in PyTorch, h 256, 4 layers, 4 heads, intermediate 688, vocabulary 256, at
# S = 1K, 2K, 4K and 1 and 2 threads. Tokens per CPU-second is printed too: on a shared machine
# it is the steadier figure. PyTorch gets its best configuration on this machine:
# the OpenMP build of OpenBLAS, OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for its command alone,
# and as many BLAS threads as torch threads. Prints a table and writes CSV to $1 (optional).
#   bench/compare_pytorch.sh [out.csv]      (after building into build/)
# ISA=avx2 runs both sides as on an AVX2-only CPU (on an AVX-512 one): Origami's kernels at
# ORIGAMI_SIMD=avx2, oneDNN at ONEDNN_MAX_CPU_ISA=AVX2, PyTorch at ATEN_CPU_CAPABILITY=avx2 with
# OpenBLAS's Haswell kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
csv=${1:-/dev/null}
steps=${STEPS:-4}
origami_env=()
pytorch_env=(-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
if [ "${ISA:-}" = avx2 ]; then
  origami_env=(ORIGAMI_SIMD=avx2 ONEDNN_MAX_CPU_ISA=AVX2)
  pytorch_env=(-u OPENBLAS_L2_SIZE ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell)
elif [ -n "${ISA:-}" ]; then
  echo "compare_pytorch.sh: ISA=${ISA} is not known (use avx2, or leave it unset)" >&2
  exit 2
fi
echo "seq,threads,origami_tokens_per_s,pytorch_tokens_per_s,speedup,origami_tokens_per_cpu_s,pytorch_tokens_per_cpu_s,cpu_speedup,origami_peak_rss_mib,pytorch_peak_rss_mib,memory_ratio" >"$csv"
printf '%6s %3s %14s %14s %8s %14s %14s %8s %12s %12s %8s\n' seq thr "origami tok/s" "pytorch tok/s" speedup "origami tok/cpu-s" "pytorch tok/cpu-s" "cpu spd" "origami MiB" "pytorch MiB" mem
for threads in 1 2; do
  for seq in 1024 2048 4096; do
    o=$(env "${origami_env[@]}" build/bench/train_step_bench --seq "$seq" --threads "$threads" --steps "$steps")
    p=$(env "${pytorch_env[@]}" \
          LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
          OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
          /usr/bin/python3 bench/pytorch_train_step.py --seq "$seq" --threads "$threads" --steps "$steps")
    /usr/bin/python3 - "$o" "$p" "$csv" <<'PY'
import json, sys
o, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
mo, mp = o["peak_rss_bytes"] / 2**20, p["peak_rss_bytes"] / 2**20
row = (o["seq"], o["threads"], o["tokens_per_s"], p["tokens_per_s"], o["tokens_per_s"] / p["tokens_per_s"],
       o["tokens_per_cpu_s"], p["tokens_per_cpu_s"], o["tokens_per_cpu_s"] / p["tokens_per_cpu_s"], mo, mp, mo / mp)
print("%6d %3d %14.0f %14.0f %7.2fx %14.0f %14.0f %7.2fx %12.1f %12.1f %7.2fx" % row)
with open(sys.argv[3], "a") as f:
    f.write("%d,%d,%.1f,%.1f,%.3f,%.1f,%.1f,%.3f,%.1f,%.1f,%.3f\n" % row)
PY
  done
done
