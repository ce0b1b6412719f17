#!/usr/bin/env bash
# Makes the reference data of tests/tokenizer/reference_test.cpp in OUT_DIR (default
# tests/tokenizer/reference/generated, ignored by git): the corpus (make_corpus.py) and the reference's ids
# (reference.mjs). Does nothing when OUT_DIR is newer than its inputs. Needs the packages
# scripts/install-test-tokenizers.sh installs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/generated}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# One at a time: CTest runs the reference tests in parallel, each of them calling this.
exec 9>"$out/.lock"
flock 9
stamp="$out/.done"
if [ -f "$stamp" ] && [ -z "$(find "$here/make_corpus.py" "$here/reference.mjs" "$here/package.json" -newer "$stamp")" ]; then
  exit 0
fi
if [ ! -d "$here/node_modules/@huggingface/tokenizers" ]; then
  echo "prepare.sh: the reference tokenizers are not installed; run scripts/install-test-tokenizers.sh" >&2
  exit 3
fi
python3 "$here/make_corpus.py" "$out/corpus.bin"
(cd "$here" && node reference.mjs "$out/corpus.bin" "$out")
touch "$stamp"
