#!/usr/bin/env bash
# Turns an Origami checkpoint into a Hugging Face folder and, where llama.cpp's converter can
# run, into an F32 GGUF, so that `origami generate` can be checked against llama.cpp
# (docs/inference.md, "Against llama.cpp").
#
#   scripts/checkpoint_to_gguf.sh CHECKPOINT OUT_DIR [LLAMA_CPP_DIR]
#
# 1. `origami export` writes OUT_DIR/hf: model.safetensors + config.json (LlamaForCausalLM,
#    untied head, F32). Always.
# 2. With LLAMA_CPP_DIR (a llama.cpp checkout), its convert_hf_to_gguf.py writes
#    OUT_DIR/model-f32.gguf. What that converter needs, checked here before it runs:
#    * Python 3 with numpy, torch, sentencepiece and transformers (llama.cpp's
#      requirements/requirements-convert_hf_to_gguf.txt; Debian: python3-numpy python3-torch,
#      the other two are not packaged in Debian 12), and the repository's own gguf-py (found
#      through PYTHONPATH, set below);
#    * a tokenizer in the folder: tokenizer.json (BPE, read through transformers) or
#      tokenizer.model (SentencePiece). A checkpoint trained on bytes has none; copy the
#      tokenizer it was trained with into OUT_DIR/hf first, else the converter stops at the
#      vocabulary.
#    Hugging Face's q/k layout is what `origami export` writes; the converter permutes q and k
#    into llama.cpp's rotary layout itself.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 CHECKPOINT OUT_DIR [LLAMA_CPP_DIR]" >&2
  exit 2
fi
ckpt=$1
out=$2
llama=${3:-}
origami=${ORIGAMI:-$(dirname "$0")/../build/origami}
if [[ ! -x $origami ]]; then
  echo "$0: no origami binary at $origami (build it, or set ORIGAMI=/path/to/origami)" >&2
  exit 2
fi

if [[ -n $llama ]]; then  # what the converter needs, checked before anything is written
  converter=$llama/convert_hf_to_gguf.py
  if [[ ! -f $converter ]]; then
    echo "$0: $converter not found: give the root of a llama.cpp checkout" >&2
    exit 2
  fi
  missing=()
  for module in numpy torch sentencepiece transformers; do
    python3 -c "import $module" 2>/dev/null || missing+=("$module")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "$0: llama.cpp's converter needs the Python modules: ${missing[*]} (missing here)" >&2
    exit 2
  fi
fi

mkdir -p "$out"
"$origami" export --checkpoint "$ckpt" --out "$out/hf"
echo "Hugging Face folder: $out/hf"
[[ -z $llama ]] && exit 0

if [[ ! -f $out/hf/tokenizer.json && ! -f $out/hf/tokenizer.model ]]; then
  echo "$0: $out/hf has no tokenizer.json or tokenizer.model; copy the model's tokenizer there" >&2
  exit 2
fi
PYTHONPATH="$llama/gguf-py${PYTHONPATH:+:$PYTHONPATH}" \
  python3 "$converter" "$out/hf" --outtype f32 --outfile "$out/model-f32.gguf"
echo "GGUF: $out/model-f32.gguf"
