// Chooses the matrix-product library by measurement: oneDNN (dnnl_sgemm, through
// origami::kernels::gemm) against OpenBLAS (cblas_sgemm) at the shapes of the model's linear
// layers (h = 256, 4 heads, intermediate 688, vocabulary 256; tokens 1024/2048/4096; forward
// x@W^T, backward dy@W and dy^T@x) and at square 1024/2048, with 1 and 2 threads.
// Reports GFLOP/s as a counter. Results and the commands: docs/results-kernels.md.
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "origami/kernels/gemm.h"
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
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
