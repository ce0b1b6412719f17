// The decode step's kernels at the shapes of issue 15's model (h 1024, 16 heads / 4 kv heads,
// kv 256, f 2816, vocabulary 32000). Results and the commands: docs/inference.md.
//   decode/{skinny,skinny_bf16,onednn}/<layer>/rows:R/threads:T  the step's products
//       (kernels/gemv.h with fp32 and bf16 weights, against oneDNN's GEMM through linear_forward)
//       for 1, 4 and 16 rows, reading W from memory as decode does (copies of W of 128 MiB in
//       all, a new one per call, so no cache level holds it); reports the weight bytes read per
//       second.
//   decode/step_products/{fp32,bf16}/rows:R/threads:T  every matrix product of one decode step
//       of the whole model (8 layers of q, k, v, o, gate, up, down, then the LM head: 122.9 M
//       weights, 491.8 MB in fp32, 245.9 MB in bf16) through linear_forward_skinny(_bf16); reports
//       tokens/s (R tokens per step) and weight GB/s: the bound a decode step's products put on
//       generation, without its attention, norms and sampling.
//   prefill/products/{fp32,bf16,bf16_widening}/rows:512/threads:T  beside decode's, every matrix
//       product of the prefill of one 512-token prompt (8 layers of q, k, v, o, gate, up, down;
//       the LM head takes one row) through linear_forward: fp32 W, bf16 W on this CPU's path
//       (oneDNN's bf16 matmul where the CPU has bf16 dot products) and bf16 W on the widening path
//       forced; reports tokens/s by wall time and by the calling thread's CPU time (at 1 thread
//       oneDNN runs on it), the second steady on a shared machine.
//   decode/attention/{one_call,one_call_bf16,per_sequence}/B:B  the step's attention
//       (kernels/decode_attention.h over an fp32 and a bf16 cache, one call for the batch, against
//       attention_forward once per sequence), 513 cached keys (and 32769 for B = 1, a cache of
//       64 MiB in fp32 that no cache level holds),
//       d 64, B = 1, 4, 16, 1 thread; reports microseconds of CPU time per call (the machine is
//       shared: wall time stretches when other processes take the core).
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "origami/core/bf16.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/decode_attention.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/gemv.h"
#include "origami/kernels/threads.h"

namespace {

// Arrays aligned to a cache line, as the engine's Tensors are (core/tensor.cpp): a plain
// vector's data sits 16 bytes past a page, where every 64-byte load of the products spans two
// lines, which is not what the engine reads.
template <class T>
struct CacheLineAligned {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAligned() = default;
  template <class U>
  CacheLineAligned(const CacheLineAligned<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  friend bool operator==(const CacheLineAligned&, const CacheLineAligned&) { return true; }
};
template <class T>
using Aligned = std::vector<T, CacheLineAligned<T>>;

Aligned<float> random_matrix(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Aligned<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Aligned<origami::bf16> to_bf16_matrix(const Aligned<float>& v) {
  Aligned<origami::bf16> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [](float f) { return origami::to_bf16(f); });
  return out;
}

enum class DecodeKernel { Skinny, SkinnyBf16, OneDnn };

const char* decode_kernel_name(DecodeKernel k) {
  switch (k) {
    case DecodeKernel::Skinny:
      return "skinny";
    case DecodeKernel::SkinnyBf16:
      return "skinny_bf16";
    case DecodeKernel::OneDnn:
      return "onednn";
  }
  return "?";
}

void run_decode(benchmark::State& state, DecodeKernel kernel, int threads, std::int64_t rows,
                std::int64_t in, std::int64_t out) {
  const std::int64_t w_elems = in * out;
  const std::int64_t w_bytes = kernel == DecodeKernel::SkinnyBf16 ? 2 : 4;
  const std::int64_t copies =
      std::max<std::int64_t>(2, (std::int64_t{128} << 20) / (w_elems * w_bytes));
  const auto W = random_matrix(w_elems * copies, 1);
  const auto W_bf16 =
      kernel == DecodeKernel::SkinnyBf16 ? to_bf16_matrix(W) : Aligned<origami::bf16>();
  const auto x = random_matrix(rows * in, 2);
  std::vector<float> y(static_cast<std::size_t>(rows * out));
  origami::kernels::set_thread_count(threads);
  std::int64_t next = 0;
  for (auto _ : state) {
    const float* w = W.data() + next * w_elems;
    const origami::bf16* w_bf16 = W_bf16.empty() ? nullptr : W_bf16.data() + next * w_elems;
    next = (next + 1) % copies;
    if (kernel == DecodeKernel::Skinny) {
      origami::kernels::linear_forward_skinny(rows, in, out, x.data(), w, y.data());
    } else if (kernel == DecodeKernel::SkinnyBf16) {
      origami::kernels::linear_forward_skinny_bf16(rows, in, out, x.data(), w_bf16, y.data());
    } else {
      origami::kernels::linear_forward(rows, in, out, x.data(), w, y.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  origami::kernels::set_thread_count(1);
  state.counters["weights_GB/s"] = benchmark::Counter(
      static_cast<double>(w_elems * w_bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// One decode step's products over the whole model of issue 15 (h 1024, kv 256, f 2816, 8
// layers, vocabulary 32000), each weight its own array, read once per step from memory.
void run_step_products(benchmark::State& state, bool bf16_weights, int threads, std::int64_t rows) {
  struct Product {
    std::int64_t in, out;
  };
  std::vector<Product> products;
  for (int l = 0; l < 8; ++l)
    for (Product p :
         {Product{1024, 1024}, Product{1024, 256}, Product{1024, 256}, Product{1024, 1024},
          Product{1024, 2816}, Product{1024, 2816}, Product{2816, 1024}})
      products.push_back(p);
  products.push_back({1024, 32000});
  std::vector<Aligned<float>> w32;
  std::vector<Aligned<origami::bf16>> w16;
  std::int64_t elems = 0;
  unsigned seed = 10;
  for (const Product& p : products) {
    auto w = random_matrix(p.in * p.out, seed++);
    elems += p.in * p.out;
    if (bf16_weights) {
      w16.push_back(to_bf16_matrix(w));
    } else {
      w32.push_back(std::move(w));
    }
  }
  const auto x = random_matrix(rows * 2816, 2);
  std::vector<float> y(static_cast<std::size_t>(rows * 32000));
  origami::kernels::set_thread_count(threads);
  for (auto _ : state) {
    for (std::size_t i = 0; i < products.size(); ++i) {
      const Product& p = products[i];
      if (bf16_weights) {
        origami::kernels::linear_forward_skinny_bf16(rows, p.in, p.out, x.data(), w16[i].data(),
                                                     y.data());
      } else {
        origami::kernels::linear_forward_skinny(rows, p.in, p.out, x.data(), w32[i].data(),
                                                y.data());
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  origami::kernels::set_thread_count(1);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weights_GB/s"] =
      benchmark::Counter(static_cast<double>(elems * (bf16_weights ? 2 : 4)) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void run_decode_attention(benchmark::State& state, bool one_call, bool bf16_cache, std::int64_t B,
                          std::int64_t keys) {
  const std::int64_t slots = keys + 127, H = 16, Hkv = 4, d = 64;
  const auto q = random_matrix(B * H * d, 1);
  const auto k = random_matrix(B * slots * Hkv * d, 2);
  const auto v = random_matrix(B * slots * Hkv * d, 3);
  const auto k16 = to_bf16_matrix(k), v16 = to_bf16_matrix(v);
  std::vector<float> out(q.size()), lse(static_cast<std::size_t>(H));
  std::vector<std::int64_t> slot_pos(static_cast<std::size_t>(slots));
  for (std::int64_t j = 0; j < slots; ++j) slot_pos[static_cast<std::size_t>(j)] = j;
  const std::vector<std::int64_t> q_pos(static_cast<std::size_t>(B), keys - 1),
      visible(static_cast<std::size_t>(B), keys);
  const float scale = 0.125f;
  const double cpu0 = thread_cpu_seconds();
  for (auto _ : state) {
    if (one_call && bf16_cache) {
      origami::kernels::decode_attention_bf16(
          {.batch = B, .slots = slots, .heads = H, .kv_heads = Hkv, .head_dim = d}, q.data(),
          k16.data(), v16.data(), q_pos.data(), slot_pos.data(), visible.data(), scale, out.data());
    } else if (one_call) {
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

enum class PrefillWeights { Fp32, Bf16, Bf16Widening };

// The prefill's products of one prompt of `rows` tokens (issue 15's model, no LM head).
void run_prefill_products(benchmark::State& state, PrefillWeights kind, int threads,
                          std::int64_t rows) {
  struct Product {
    std::int64_t in, out;
  };
  std::vector<Product> products;
  for (int l = 0; l < 8; ++l)
    for (Product p :
         {Product{1024, 1024}, Product{1024, 256}, Product{1024, 256}, Product{1024, 1024},
          Product{1024, 2816}, Product{1024, 2816}, Product{2816, 1024}})
      products.push_back(p);
  std::vector<Aligned<float>> w32;
  std::vector<Aligned<origami::bf16>> w16;
  unsigned seed = 10;
  for (const Product& p : products) {
    auto w = random_matrix(p.in * p.out, seed++);
    if (kind == PrefillWeights::Fp32) {
      w32.push_back(std::move(w));
    } else {
      w16.push_back(to_bf16_matrix(w));
    }
  }
  const auto x = random_matrix(rows * 2816, 2);
  std::vector<float> y(static_cast<std::size_t>(rows * 2816));
  origami::kernels::set_thread_count(threads);
  origami::kernels::force_gemm_bf16_conversion(kind == PrefillWeights::Bf16Widening);
  const double cpu0 = thread_cpu_seconds();
  for (auto _ : state) {
    for (std::size_t i = 0; i < products.size(); ++i) {
      const Product& p = products[i];
      if (kind == PrefillWeights::Fp32) {
        origami::kernels::linear_forward(rows, p.in, p.out, x.data(), w32[i].data(), y.data());
      } else {
        origami::kernels::linear_forward(rows, p.in, p.out, x.data(), w16[i].data(), y.data());
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double cpu = thread_cpu_seconds() - cpu0;
  origami::kernels::force_gemm_bf16_conversion(false);
  origami::kernels::set_thread_count(1);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/cpu_s"] = static_cast<double>(rows * state.iterations()) / cpu;
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
        for (DecodeKernel k :
             {DecodeKernel::Skinny, DecodeKernel::SkinnyBf16, DecodeKernel::OneDnn}) {
          const std::string name = fmt::format("decode/{}/{}/rows:{}/threads:{}",
                                               decode_kernel_name(k), l.name, rows, threads);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) { run_decode(st, k, threads, rows, l.in, l.out); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
  for (std::int64_t rows : {1, 4, 16})
    for (int threads : {1, 2})
      for (bool bf16_weights : {false, true}) {
        const std::string name = fmt::format("decode/step_products/{}/rows:{}/threads:{}",
                                             bf16_weights ? "bf16" : "fp32", rows, threads);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& st) { run_step_products(st, bf16_weights, threads, rows); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
  for (int threads : {1, 2})
    for (const auto& [kind, label] : {std::pair{PrefillWeights::Fp32, "fp32"},
                                      std::pair{PrefillWeights::Bf16, "bf16"},
                                      std::pair{PrefillWeights::Bf16Widening, "bf16_widening"}}) {
      const std::string name =
          fmt::format("prefill/products/{}/rows:512/threads:{}", label, threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        run_prefill_products(st, kind, threads, 512);
      })->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  for (std::int64_t B : {1, 4, 16})
    for (const char* mode : {"one_call", "one_call_bf16", "per_sequence"}) {
      const bool one_call = std::string(mode) != "per_sequence";
      const bool bf16_cache = std::string(mode) == "one_call_bf16";
      const std::string name = fmt::format("decode/attention/{}/B:{}", mode, B);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        run_decode_attention(st, one_call, bf16_cache, B, 513);
      })->Unit(benchmark::kMicrosecond);
    }
  for (const char* mode : {"one_call", "one_call_bf16"}) {
    const std::string name = fmt::format("decode/attention/{}/B:1/keys:32769", mode);
    const bool bf16_cache = std::string(mode) == "one_call_bf16";
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
      run_decode_attention(st, true, bf16_cache, 1, 32769);
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
