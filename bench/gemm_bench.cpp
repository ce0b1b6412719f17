// Chooses the matrix-product library by measurement: oneDNN (dnnl_sgemm, through
// origami::kernels::gemm) against OpenBLAS (cblas_sgemm) at the shapes of the model's linear
// layers (h = 256, 4 heads, intermediate 688, vocabulary 256; tokens 1024/2048/4096; forward
// x@W^T, backward dy@W and dy^T@x) and at square 1024/2048, with 1 and 2 threads.
// Reports GFLOP/s as a counter. Results and the commands: docs/results-kernels.md.
// decode/...: the decode step's products (kernels/gemv.h against oneDNN's GEMM) at the shapes of
// issue 15's model (h 1024, kv 256, f 2816, vocabulary 32000) for 1, 4 and 16 rows, reading W
// from memory as decode does (copies of W of 128 MiB in all, a new one per call, so no cache
// level holds it); reports the weight bytes read per second. Results: docs/inference.md.
// decode/attention/...: the step's attention beside them (kernels/decode_attention.h, one call
// for the batch, against attention_forward once per sequence), 513 cached keys, H 16 / Hkv 4,
// d 64, B = 1, 4, 16, 1 thread; reports microseconds of CPU time per call (the machine is
// shared: wall time stretches when other processes take the core).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
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

#ifdef ORIGAMI_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

using origami::kernels::Trans;

enum class Library { OneDnn, OpenBlas };

struct Shape {
  std::string name;
  Trans ta, tb;
  std::int64_t M, N, K;
  float beta;  // the backward products accumulate (beta = 1), as linear_backward_* do
};

std::vector<float> random_matrix(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void run_gemm(benchmark::State& state, Library lib, int threads, const Shape& s) {
  // Stored shapes of A and B (row-major), from the transposes.
  const std::int64_t a_cols = s.ta == Trans::N ? s.K : s.M;
  const std::int64_t b_cols = s.tb == Trans::N ? s.N : s.K;
  const auto A = random_matrix(s.M * s.K, 1);
  const auto B = random_matrix(s.K * s.N, 2);
  auto C = random_matrix(s.M * s.N, 3);
  if (lib == Library::OneDnn) {
    origami::kernels::set_thread_count(threads);
    for (auto _ : state) {
      origami::kernels::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), a_cols, B.data(), b_cols,
                             s.beta, C.data(), s.N);
      benchmark::DoNotOptimize(C.data());
      benchmark::ClobberMemory();
    }
    origami::kernels::set_thread_count(1);
  } else {
#ifdef ORIGAMI_BENCH_OPENBLAS
    openblas_set_num_threads(threads);
    const auto ta = s.ta == Trans::N ? CblasNoTrans : CblasTrans;
    const auto tb = s.tb == Trans::N ? CblasNoTrans : CblasTrans;
    for (auto _ : state) {
      cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(s.M), static_cast<blasint>(s.N),
                  static_cast<blasint>(s.K), 1.0f, A.data(), static_cast<blasint>(a_cols),
                  B.data(), static_cast<blasint>(b_cols), s.beta, C.data(),
                  static_cast<blasint>(s.N));
      benchmark::DoNotOptimize(C.data());
      benchmark::ClobberMemory();
    }
#else
    state.SkipWithError("gemm_bench was built without OpenBLAS");
#endif
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      origami::kernels::gemm_flops(s.M, s.N, s.K) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

std::vector<Shape> model_shapes() {
  struct Layer {
    const char* name;
    std::int64_t in, out;
  };
  // Q, K, V, O and the LM head are 256 -> 256; gate and up 256 -> 688; down 688 -> 256.
  const Layer layers[] = {{"attn_qkvo_lmhead_256x256", 256, 256},
                          {"mlp_gate_up_256to688", 256, 688},
                          {"mlp_down_688to256", 688, 256}};
  std::vector<Shape> shapes;
  for (std::int64_t tokens : {1024, 2048, 4096})
    for (const Layer& l : layers) {
      const std::string tag = fmt::format("{}/tokens:{}", l.name, tokens);
      shapes.push_back({tag + "/fwd_xWt", Trans::N, Trans::T, tokens, l.out, l.in, 0.0f});
      shapes.push_back({tag + "/bwd_dyW", Trans::N, Trans::N, tokens, l.in, l.out, 1.0f});
      shapes.push_back({tag + "/bwd_dyTx", Trans::T, Trans::N, l.out, l.in, tokens, 1.0f});
    }
  for (std::int64_t n : {1024, 2048})
    shapes.push_back({fmt::format("square:{}", n), Trans::N, Trans::N, n, n, n, 0.0f});
  return shapes;
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
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", coretype ? coretype : "(unset)");
#ifdef ORIGAMI_BENCH_OPENBLAS
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
#endif
  for (const Shape& s : model_shapes())
    for (int threads : {1, 2})
      for (Library lib : {Library::OneDnn, Library::OpenBlas}) {
        const std::string name = fmt::format("gemm/{}/{}/threads:{}",
                                             lib == Library::OneDnn ? "onednn" : "openblas", s.name, threads);
        benchmark::RegisterBenchmark(name.c_str(), [lib, threads, s](benchmark::State& st) {
          run_gemm(st, lib, threads, s);
        })->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
  register_decode();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
