#!/usr/bin/env bash
# Installs every dependency of Origami from Debian 12's packages. Safe to run again.
set -euo pipefail

packages=(
  cmake g++ make ninja-build pkg-config git
  libdnnl-dev libopenblas-dev                 # matrix products (oneDNN chosen by measurement; OpenBLAS for comparison)
  libhwy-dev                                  # portable SIMD with run-time dispatch (Google Highway)
  libopenmpi-dev openmpi-bin                  # the mpi transport
  iproute2                                    # ip, bridge: hosts as network namespaces (tests/netns)
  nlohmann-json3-dev libcli11-dev libfmt-dev  # configuration, command line, formatting
  libgtest-dev libgmock-dev libbenchmark-dev  # tests and benchmarks
  libsentencepiece-dev sentencepiece          # SentencePiece .model tokenizers (spm_train for their test)
  clang clang-format libclang-rt-14-dev       # libFuzzer + sanitizers
  gnuplot-nox                                 # plots in docs/
  python3 python3-torch python3-numpy         # the independent PyTorch oracle
  libopenblas0-openmp                         # PyTorch at its best in the side-by-side benchmark
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all ${#packages[@]} packages present"
