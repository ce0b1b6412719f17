#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and static libraries, for the side-by-side comparison
# (bench/llama_cpp/side_by_side.sh, docs/inference.md "Against llama.cpp"). Not part of the
# test suite. The source comes from the npm registry: the package node-llama-cpp carries the
# llama.cpp release it binds as a git bundle (llama/gitRelease.bundle), so no other network is
# needed. Built here, on this CPU, with llama.cpp's own defaults (GGML_NATIVE: every instruction
# set this CPU has).
#
#   scripts/install-llama-cpp.sh [DIR]     (default DIR: ./.llama.cpp, ignored by git)
#   -> DIR/src (the checkout), DIR/build/bin/llama-bench, DIR/build/{src,ggml/src}/*.a
set -euo pipefail

version=3.22.1  # node-llama-cpp; its llama/llama.cpp.info.json names the llama.cpp tag
dir=$(realpath -m "${1:-$(dirname "$0")/../.llama.cpp}")
mkdir -p "$dir/npm"
if [[ ! -f $dir/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle ]]; then
  # --ignore-scripts: the package's postinstall would fetch prebuilt binaries; only the source
  # bundle is wanted.
  (cd "$dir/npm" && npm install --no-audit --no-fund --ignore-scripts --omit=optional \
    --prefix "$dir/npm" "node-llama-cpp@$version")
fi
if [[ ! -d $dir/src/.git ]]; then
  git clone -q "$dir/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$dir/src"
fi
echo "llama.cpp: $(cat "$dir/npm/node_modules/node-llama-cpp/llama/llama.cpp.info.json" | tr -d '\n ')" \
  "commit $(git -C "$dir/src" rev-parse --short HEAD)"
cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  > "$dir/cmake.log"
ninja -C "$dir/build" llama-bench
echo "built: $dir/build/bin/llama-bench"
