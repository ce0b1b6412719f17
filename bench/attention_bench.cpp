// Flash-attention throughput against this machine's GEMM rate.
//   attention forward/backward, causal, B = 1, d = 64, S = 1K, 4K, 16K, H/Hkv = 4/4 and 8/2,
//   1 and 2 threads; GFLOP/s counted with attention_forward_flops (backward: 2.5x that).
//   oneDNN sgemm on a square 1024 product, 1 and 2 threads, for the ratio; the attention's own
//   tile product in cache, for the ceiling of one core.
// Run: build/bench/attention_bench --benchmark_counters_tabular=true (see
// docs/results-attention.md)
#include <cmath>
#include <cstdint>
#include <ctime>
#include <numeric>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include "bench/simd_bench_main.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/threads.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/attention_bench.cpp"  // the source root is on the include path
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/attention_simd-inl.h"

// The attention's tile product, compiled for every target like the kernels.
HWY_BEFORE_NAMESPACE();
namespace origami::kernels::attn::HWY_NAMESPACE {
void TileProduct(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                 float* c) {
  tile_product(m, n, k, a, k, 1, b, n, c, n, Init::Zero);
}
}  // namespace origami::kernels::attn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels::attn {
HWY_EXPORT(TileProduct);
}  // namespace origami::kernels::attn

namespace {

using origami::kernels::AttentionShape;

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = dist(gen);
  return x;
}

struct Problem {
  AttentionShape s;
  std::vector<std::int64_t> pos;
  std::vector<float> q, k, v, out, lse, dout, dq, dk, dv;
  float scale;
  double forward_flops;

  Problem(std::int64_t S, std::int64_t H, std::int64_t Hkv) : s{1, S, S, H, Hkv, 64} {
    pos.resize(static_cast<std::size_t>(S));
    std::iota(pos.begin(), pos.end(), 0);
    const auto nq = static_cast<std::size_t>(S * H * 64),
               nk = static_cast<std::size_t>(S * Hkv * 64);
    q = random_vector(nq, 1);
    k = random_vector(nk, 2);
    v = random_vector(nk, 3);
    dout = random_vector(nq, 4);
    out.resize(nq);
    lse.resize(static_cast<std::size_t>(S * H));
    dq.resize(nq);
    dk.resize(nk);
    dv.resize(nk);
    scale = 1.0f / std::sqrt(64.0f);
    forward_flops = origami::kernels::attention_forward_flops(s, pos.data(), pos.data());
  }
  void forward() {
    origami::kernels::attention_forward(s, q.data(), k.data(), v.data(), pos.data(), pos.data(),
                                        scale, out.data(), lse.data());
  }
  void backward() {
    origami::kernels::attention_backward(s, q.data(), k.data(), v.data(), pos.data(), pos.data(),
                                         scale, out.data(), lse.data(), dout.data(), dq.data(),
                                         dk.data(), dv.data());
  }
};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Two rates: GFLOP/s over wall time, and cpu_GFLOP/s over the CPU time of all the process's
// threads (the rate per busy core). The machine is shared: when other processes take the
// cores, wall time stretches but the CPU-time rate stays close to what a core does, so the
// ratios to the GEMM are taken on it. Idle-waiting (spinning) worker threads count as busy.
void set_rates(benchmark::State& state, double flops, double cpu_seconds) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cpu_GFLOP/s"] =
      flops * static_cast<double>(state.iterations()) / cpu_seconds / 1e9;
}

// Args: S, H, Hkv, threads.
void BM_AttentionForward(benchmark::State& state) {
  origami::kernels::set_thread_count(static_cast<int>(state.range(3)));
  Problem p(state.range(0), state.range(1), state.range(2));
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    p.forward();
    benchmark::DoNotOptimize(p.out.data());
  }
  set_rates(state, p.forward_flops, process_cpu_seconds() - cpu0);
  origami::kernels::set_thread_count(1);
}

void BM_AttentionBackward(benchmark::State& state) {
  origami::kernels::set_thread_count(static_cast<int>(state.range(3)));
  Problem p(state.range(0), state.range(1), state.range(2));
  p.forward();
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    p.backward();
    benchmark::DoNotOptimize(p.dq.data());
  }
  set_rates(state, 2.5 * p.forward_flops, process_cpu_seconds() - cpu0);
  origami::kernels::set_thread_count(1);
}

void attention_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"S", "H", "Hkv", "threads"});
  for (std::int64_t threads : {1, 2}) {
    for (std::int64_t S : {1024, 4096, 16384}) {
      b->Args({S, 4, 4, threads});
      b->Args({S, 8, 2, threads});
    }
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_AttentionForward)->Apply(attention_args);
BENCHMARK(BM_AttentionBackward)->Apply(attention_args);

// oneDNN fp32 GEMM, square N: the machine's reference rate. Args: N, threads.
void BM_OneDnnSgemm(benchmark::State& state) {
  origami::kernels::set_thread_count(static_cast<int>(state.range(1)));
  const std::int64_t n = state.range(0);
  const auto a = random_vector(static_cast<std::size_t>(n * n), 5);
  const auto b = random_vector(static_cast<std::size_t>(n * n), 6);
  std::vector<float> c(static_cast<std::size_t>(n * n));
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    const dnnl_status_t st =
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    if (st != dnnl_success) state.SkipWithError("dnnl_sgemm failed");
    benchmark::DoNotOptimize(c.data());
  }
  set_rates(state, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n),
            process_cpu_seconds() - cpu0);
  origami::kernels::set_thread_count(1);
}
BENCHMARK(BM_OneDnnSgemm)
    ->ArgNames({"N", "threads"})
    ->Args({1024, 1})
    ->Args({1024, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The attention's own register-blocked tile product on an L1-resident 64 x 256 x 64 problem
// (the shape of its score products): what one core's FMA units give this code, the ceiling
// for the attention kernels.
void BM_TileProduct(benchmark::State& state) {
  const std::int64_t m = 64, n = 256, k = 64;
  const auto a = random_vector(static_cast<std::size_t>(m * k), 7);
  const auto b = random_vector(static_cast<std::size_t>(k * n), 8);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    HWY_DYNAMIC_DISPATCH(origami::kernels::attn::TileProduct)(m, n, k, a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, 2.0 * static_cast<double>(m * n * k), process_cpu_seconds() - cpu0);
}
BENCHMARK(BM_TileProduct)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

// The SIMD target (ORIGAMI_SIMD may restrict it) in the benchmark's context lines.
ORIGAMI_SIMD_BENCHMARK_MAIN()
#endif  // HWY_ONCE
