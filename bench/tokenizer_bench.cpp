// Encoding speed of the tokenizer.json tokenizers on the tokenizer tests' corpus (1.27 MB,
// tests/tokenizer/reference/make_corpus.py) with the real Llama 2, Llama 3 and Qwen 3
// vocabularies, in bytes of input per second. The reference's speed on the same corpus is in
// tests/tokenizer/reference/generated/speed.json (reference.mjs); docs/tokenizers.md has both.
//   Encode/NAME       the corpus again and again (the pre-token cache warm after the first)
//   EncodeCold/NAME   the first pass of a freshly loaded tokenizer (an empty cache)
//   Load/NAME         reading tokenizer.json and building the tokenizer (and freeing it)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "../tests/tokenizer/reference_data.h"
#include "origami/tokenizer/tokenizer.h"

namespace {

namespace tok = origami::tokenizer;
using namespace origami::tokenizer_test;

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> docs = [] {
    const std::string error = prepare_reference();
    if (!error.empty()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", error.c_str());
      std::exit(1);
    }
    return read_framed_texts(reference_dir() + "/corpus.bin");
  }();
  return docs;
}

std::int64_t corpus_bytes() {
  std::int64_t n = 0;
  for (const std::string& d : corpus()) n += static_cast<std::int64_t>(d.size());
  return n;
}

void encode_all(const tok::Tokenizer& t, benchmark::State& state) {
  std::size_t tokens = 0;
  for (const std::string& d : corpus()) tokens += t.encode(d).size();
  benchmark::DoNotOptimize(tokens);
  state.counters["tokens"] = static_cast<double>(tokens);
}

void Encode(benchmark::State& state, const std::string& name) {
  const auto t = tok::load(tokenizer_json(name));
  for (auto _ : state) encode_all(*t, state);
  state.SetBytesProcessed(state.iterations() * corpus_bytes());
}

void EncodeCold(benchmark::State& state, const std::string& name) {
  for (auto _ : state) {
    state.PauseTiming();
    auto t = tok::load(tokenizer_json(name));
    state.ResumeTiming();
    encode_all(*t, state);
    state.PauseTiming();
    t.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * corpus_bytes());
}

void Load(benchmark::State& state, const std::string& name) {
  const std::string path = tokenizer_json(name);
  for (auto _ : state) benchmark::DoNotOptimize(tok::load(path));
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* name : kReferenceTokenizers) {
    benchmark::RegisterBenchmark((std::string("Encode/") + name).c_str(), Encode, std::string(name))
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0);
    benchmark::RegisterBenchmark((std::string("EncodeCold/") + name).c_str(), EncodeCold,
                                 std::string(name))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
    benchmark::RegisterBenchmark((std::string("Load/") + name).c_str(), Load, std::string(name))
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime()
        ->Iterations(3);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
