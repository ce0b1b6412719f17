// Reading training data from a mapped Origami token file (docs/data.md), single-threaded:
//   OpenTokenFile      opening and validating a file of 64 Mi uint16 tokens (128 MiB), up
//                      front: the index checks and the pass over every id (bytes/s)
//   ReadRows/ORDER     one batch of 8 x 2048-token rows, in the random or the epoch order
//                      (tokens/s), as the prefetch thread reads them
// The file is written once into the temporary folder (TMPDIR or /tmp) and removed at exit; the
// second and later reads come from the page cache, as a training run's do after the first epoch.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "origami/data/token_file.h"
#include "origami/data/dataset.h"

namespace {

namespace data = origami::data;

constexpr std::int64_t kTokens = std::int64_t{64} << 20;

// The file, written on first use and removed when the program ends.
struct TempTokenFile {
  std::string prefix;
  TempTokenFile() {
    const char* tmp = std::getenv("TMPDIR");
    prefix = std::string(tmp ? tmp : "/tmp") + "/origami_data_bench_" + std::to_string(::getpid());
    data::TokenFileWriter w(prefix, 50257, 0);
    std::vector<std::int32_t> doc(1 << 16);
    std::uint32_t x = 12345;
    for (std::int64_t done = 0; done < kTokens; done += std::ssize(doc)) {
      for (auto& id : doc) id = static_cast<std::int32_t>((x = x * 1664525u + 1013904223u) % 50257);
      w.add_document(doc);
    }
    w.finish();
  }
  ~TempTokenFile() {
    std::filesystem::remove(prefix + ".tokens");
    std::filesystem::remove(prefix + ".index");
  }
};

const std::string& token_file() {
  static const TempTokenFile file;
  return file.prefix;
}

void OpenTokenFile(benchmark::State& state) {
  const std::string& p = token_file();
  for (auto _ : state) benchmark::DoNotOptimize(data::open_token_file(p).vocab_size);
  state.SetBytesProcessed(state.iterations() * kTokens * 2);
}
BENCHMARK(OpenTokenFile)->Unit(benchmark::kMillisecond);

void ReadRows(benchmark::State& state) {
  const data::DataOptions options{.order = state.range(0) ? data::DataOrder::Epoch
                                                          : data::DataOrder::Random};
  const data::TokenDataset d = data::TokenDataset::open(token_file(), options);
  origami::MemoryTracker tracker;
  const std::int64_t B = 8, S = 2048;
  std::int64_t step = 0;
  for (auto _ : state) {
    const data::Batch b = d.batch(1, step++, B, S, tracker);
    benchmark::DoNotOptimize(b.input_ids.data<std::int32_t>());
  }
  state.SetItemsProcessed(state.iterations() * B * S);
  state.SetLabel(state.range(0) ? "epoch" : "random");
}
BENCHMARK(ReadRows)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
