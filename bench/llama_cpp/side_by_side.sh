#!/usr/bin/env bash
# Origami beside llama.cpp on this CPU (issue 15; docs/inference.md "Against llama.cpp"):
#  1. exactness: the default job's model (trained here for STEPS steps, bytes as tokens),
#     exported (`origami export`), converted (hf_to_gguf.py); the greedy continuation of a
#     prompt from `origami generate` and from llama.cpp (llama_greedy.cpp) compared token by
#     token, single device and TSP 2;
#  2. speed: issue 15's model (h 1024, 8 layers, 16 / 4 heads, f 2816, vocabulary 32000) in F32
#     and BF16: `llama-bench -p 512 -n 128` at 1 and 2 threads beside
#     `generate_bench --speed` (the same prompt and new-token counts, its own random weights of
#     the same shape: speed does not depend on the values).
#
#   bench/llama_cpp/side_by_side.sh [LLAMA_DIR] [WORK_DIR]
# LLAMA_DIR: scripts/install-llama-cpp.sh's folder (default ./.llama.cpp, built if absent);
# WORK_DIR: scratch (default a new temporary folder). PARTS="exact speed" (default) or either. Needs build/origami and
# build/bench/generate_bench (Release), and Debian's Python with numpy (python3-numpy, which
# scripts/install-deps.sh installs; PYTHON overrides).
set -euo pipefail

root=$(realpath "$(dirname "$0")/../..")
llama=$(realpath -m "${1:-$root/.llama.cpp}")
work=${2:-$(mktemp -d)}
steps=${STEPS:-120}
parts=${PARTS:-exact speed}
origami=$root/build/origami
bench=$root/build/bench/generate_bench
for f in "$origami" "$bench"; do
  [[ -x $f ]] || { echo "$0: $f missing: build the Release tree first" >&2; exit 2; }
done
py=${PYTHON:-/usr/bin/python3}
"$py" -c "import numpy" 2>/dev/null || { echo "$0: $py has no numpy (python3-numpy)" >&2; exit 2; }
[[ -x $llama/build/bin/llama-bench ]] || "$root/scripts/install-llama-cpp.sh" "$llama"
export PYTHONPATH="$llama/src/gguf-py${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$work"
cd "$work"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; work folder $work"

# llama.cpp's side of the exactness check, linked against the static libraries just built.
g++ -O2 -std=c++17 -I"$llama/src/include" -I"$llama/src/ggml/include" \
  "$root/bench/llama_cpp/llama_greedy.cpp" -o llama_greedy \
  "$llama/build/src/libllama.a" "$llama/build/ggml/src/libggml.a" \
  "$llama/build/ggml/src/libggml-cpu.a" "$llama/build/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl

# 1. Exactness.
if [[ $parts == *exact* ]]; then
"$origami" train --steps "$steps" --save-dir tiny --log-every "$steps" > tiny-train.log
ckpt=$(ls -d tiny/step-* | tail -1)
"$origami" export --checkpoint "$ckpt" --out tiny-hf > /dev/null
"$py" "$root/bench/llama_cpp/hf_to_gguf.py" tiny-hf tiny-f32.gguf --dtype f32
prompt="The king said"
new=48
ids=$("$py" -c "import sys; print(' '.join(str(b) for b in sys.argv[1].encode()))" "$prompt")
llama_ids=$(./llama_greedy tiny-f32.gguf 1 "$new" $ids)
for strategy in "single" "tsp --degree 2"; do
  # generate prints the prompt and its continuation first, then its report lines
  origami_ids=$("$origami" generate --checkpoint "$ckpt" --prompt "$prompt" --strategy $strategy \
      --max-new-tokens "$new" --temperature 0 2> /dev/null |
    "$py" -c "import sys; d = sys.stdin.buffer.read()[len(sys.argv[1].encode()):][:$new];
print(' '.join(str(b) for b in d))" "$prompt")
  if [[ $origami_ids == "$llama_ids" ]]; then
    echo "exactness, $strategy: the same $new greedy tokens as llama.cpp"
  else
    echo "exactness, $strategy: DIFFERENT greedy tokens"
    echo "  origami:   $origami_ids"
    echo "  llama.cpp: $llama_ids"
  fi
done
fi

# 2. Speed.
[[ $parts == *speed* ]] || exit 0
cat > speed-config.json <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
 "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
 "num_attention_heads": 16, "num_key_value_heads": 4, "hidden_act": "silu",
 "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "max_position_embeddings": 4096,
 "tie_word_embeddings": false}
JSON
"$origami" train --config speed-config.json --strategy single --steps 1 --seq 64 --batch 1 \
  --save-dir speed > speed-train.log
"$origami" export --checkpoint "$(ls -d speed/step-* | tail -1)" --out speed-hf > /dev/null
for dtype in f32 bf16; do
  "$py" "$root/bench/llama_cpp/hf_to_gguf.py" speed-hf "speed-$dtype.gguf" --dtype "$dtype"
  "$llama/build/bin/llama-bench" -m "speed-$dtype.gguf" -p 512 -n 128 -t 1,2 -r 3 -o md \
    | tee "llama-bench-$dtype.md"
done
"$bench" --speed --precision both --out-prefix "$work/origami" --prompt 512 --new-tokens 128
echo "origami: $work/origami-speed.csv"
