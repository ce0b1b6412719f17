#!/bin/sh
# fuzz_smoke.sh TARGET SEEDS DICT RUNS: TARGET on a scratch copy of the seed corpus (libFuzzer
# adds what it finds to the folder; the committed seeds stay small) for RUNS inputs.
# Exit 77 (skipped) when TARGET was not built; libFuzzer's exit code otherwise.
target=$1 seeds=$2 dict=$3 runs=$4
if [ ! -x "$target" ]; then
  echo "no $target: build it with the clang fuzz configure (fuzz/CMakeLists.txt)"
  # scripts/test.sh builds it, so in CI a missing target is a failure, not a skip.
  [ -n "${CI:-}" ] && exit 1
  exit 77
fi
scratch=$(mktemp -d) || exit 1
cp "$seeds"/* "$scratch"/
"$target" -runs="$runs" -dict="$dict" -print_final_stats=1 "$scratch"
rc=$?
rm -rf "$scratch"
exit $rc
