// The decode step's kernels at the shapes of issue 15's model (h 1024, 16 heads / 4 kv heads,
// kv 256, f 2816, vocabulary 32000). Results and the commands: docs/inference.md.
//   decode/{skinny,onednn}/<layer>/rows:R/threads:T  the step's products (kernels/gemv.h against
//       oneDNN's GEMM through linear_forward) for 1, 4 and 16 rows, reading W from memory as
//       decode does (copies of W of 128 MiB in all, a new one per call, so no cache level holds
//       it); reports the weight bytes read per second.
//   decode/attention/{one_call,per_sequence}/B:B  the step's attention (kernels/decode_attention.h,
//       one call for the batch, against attention_forward once per sequence), 513 cached keys,
//       d 64, B = 1, 4, 16, 1 thread; reports microseconds of CPU time per call (the machine is
//       shared: wall time stretches when other processes take the core).
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "origami/kernels/attention.h"
#include "origami/kernels/decode_attention.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/gemv.h"
#include "origami/kernels/threads.h"

namespace {

std::vector<float> random_matrix(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

enum class DecodeKernel { Skinny, OneDnn };

void run_decode(benchmark::State& state, DecodeKernel kernel, int threads, std::int64_t rows,
                std::int64_t in, std::int64_t out) {
  const std::int64_t w_elems = in * out;
  const std::int64_t copies = std::max<std::int64_t>(2, (std::int64_t{128} << 20) / (w_elems * 4));
  const auto W = random_matrix(w_elems * copies, 1);
  const auto x = random_matrix(rows * in, 2);
  std::vector<float> y(static_cast<std::size_t>(rows * out));
  origami::kernels::set_thread_count(threads);
  std::int64_t next = 0;
  for (auto _ : state) {
    const float* w = W.data() + next * w_elems;
    next = (next + 1) % copies;
    if (kernel == DecodeKernel::Skinny) {
      origami::kernels::linear_forward_skinny(rows, in, out, x.data(), w, y.data());
    } else {
      origami::kernels::linear_forward(rows, in, out, x.data(), w, y.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  origami::kernels::set_thread_count(1);
  state.counters["weights_GB/s"] = benchmark::Counter(
      static_cast<double>(w_elems) * 4e-9, benchmark::Counter::kIsIterationInvariantRate);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void run_decode_attention(benchmark::State& state, bool one_call, std::int64_t B) {
  const std::int64_t slots = 640, keys = 513, H = 16, Hkv = 4, d = 64;
  const auto q = random_matrix(B * H * d, 1);
  const auto k = random_matrix(B * slots * Hkv * d, 2);
  const auto v = random_matrix(B * slots * Hkv * d, 3);
  std::vector<float> out(q.size()), lse(static_cast<std::size_t>(H));
  std::vector<std::int64_t> slot_pos(static_cast<std::size_t>(slots));
  for (std::int64_t j = 0; j < slots; ++j) slot_pos[static_cast<std::size_t>(j)] = j;
  const std::vector<std::int64_t> q_pos(static_cast<std::size_t>(B), keys - 1),
      visible(static_cast<std::size_t>(B), keys);
  const float scale = 0.125f;
  const double cpu0 = thread_cpu_seconds();
  for (auto _ : state) {
    if (one_call) {
      origami::kernels::decode_attention(
          {.batch = B, .slots = slots, .heads = H, .kv_heads = Hkv, .head_dim = d}, q.data(),
          k.data(), v.data(), q_pos.data(), slot_pos.data(), visible.data(), scale, out.data());
    } else {
      for (std::int64_t b = 0; b < B; ++b)
        origami::kernels::attention_forward(
            {.batch = 1, .q_len = 1, .kv_len = keys, .heads = H, .kv_heads = Hkv, .head_dim = d},
            q.data() + b * H * d, k.data() + b * slots * Hkv * d, v.data() + b * slots * Hkv * d,
            &q_pos[static_cast<std::size_t>(b)], slot_pos.data(), scale, out.data() + b * H * d,
            lse.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["cpu_us/call"] =
      (thread_cpu_seconds() - cpu0) / static_cast<double>(state.iterations()) * 1e6;
}

void register_decode() {
  struct Layer {
    const char* name;
    std::int64_t in, out;
  };
  const Layer layers[] = {{"q_o_1024x1024", 1024, 1024},
                          {"kv_1024to256", 1024, 256},
                          {"gate_up_1024to2816", 1024, 2816},
                          {"down_2816to1024", 2816, 1024},
                          {"lm_head_1024to32000", 1024, 32000}};
  for (const Layer& l : layers)
    for (std::int64_t rows : {1, 4, 16})
      for (int threads : {1, 2})
        for (DecodeKernel k : {DecodeKernel::Skinny, DecodeKernel::OneDnn}) {
          const std::string name =
              fmt::format("decode/{}/{}/rows:{}/threads:{}",
                          k == DecodeKernel::Skinny ? "skinny" : "onednn", l.name, rows, threads);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) { run_decode(st, k, threads, rows, l.in, l.out); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
  for (std::int64_t B : {1, 4, 16})
    for (bool one_call : {true, false}) {
      const std::string name =
          fmt::format("decode/attention/{}/B:{}", one_call ? "one_call" : "per_sequence", B);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        run_decode_attention(st, one_call, B);
      })->Unit(benchmark::kMicrosecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  register_decode();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
