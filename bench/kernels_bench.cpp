// Times the elementwise and row-wise kernels at the model's shapes (h = 256, 4 heads of 64,
// intermediate 688, vocabulary 256, 4096 tokens) so that they can be set against the GEMMs of
// the same layer (gemm_bench): they must not be the bottleneck. 1 and 2 threads; also the
// communicator's element-wise reductions (sum, max) on one layer's gradient. The bf16 rows
// (`*_bf16`, bf16 activations: kernels' `_bf16` functions) sit beside their fp32 ones; their
// Melem/s over the fp32 row's is the bf16 / fp32 ratio.
// Counters: Melem/s, and GB/s of the bytes each kernel must move at the least (every array
// read or written once; small tables, the weights and dw counted as in cache). ORIGAMI_SIMD=
// <target> picks the SIMD target (the context line "simd_target" names the one used).
// Buffers are 64-byte aligned, as the program's tensors are (core/tensor.cpp): a full-width
// AVX-512 access to a row that is not straddles two cache lines.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/simd_bench_main.h"
#include "origami/comm/reduce_op.h"
#include "origami/core/bf16.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/kernels/embedding.h"
#include "origami/kernels/optimizer.h"
#include "origami/kernels/rmsnorm.h"
#include "origami/kernels/rope.h"
#include "origami/kernels/swiglu.h"
#include "origami/kernels/threads.h"

namespace {

namespace k = origami::kernels;

constexpr std::int64_t kTokens = 4096, kHidden = 256, kHeads = 4, kHeadDim = 64, kFfn = 688,
                       kVocab = 256;

// Cache-line aligned storage, as core/tensor.cpp allocates.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};
using Floats = std::vector<float, CacheLineAllocator<float>>;

Floats random_vec(std::int64_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

using Bf16s = std::vector<origami::bf16, CacheLineAllocator<origami::bf16>>;

Bf16s random_bf16(std::int64_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  const Floats f = random_vec(n, seed, lo, hi);
  Bf16s v(f.size());
  k::convert_to_bf16(n, f.data(), v.data());
  return v;
}

// Sets the thread count from the benchmark's argument and reports elements and bytes per
// second (`bytes` per element).
struct Scope {
  benchmark::State& state;
  std::int64_t elements;
  double bytes;
  Scope(benchmark::State& s, std::int64_t n, double bytes_per_element)
      : state(s), elements(n), bytes(bytes_per_element) {
    k::set_thread_count(static_cast<int>(s.range(0)));
  }
  ~Scope() {
    state.counters["Melem/s"] = benchmark::Counter(static_cast<double>(elements) * 1e-6,
                                                   benchmark::Counter::kIsIterationInvariantRate);
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(elements) * bytes * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
    k::set_thread_count(1);
  }
};

void BM_rmsnorm_forward(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 8);
  const auto x = random_vec(kTokens * kHidden, 1), w = random_vec(kHidden, 2);
  Floats y(x.size()), rstd(kTokens);
  for (auto _ : state) {
    k::rmsnorm_forward(kTokens, kHidden, x.data(), w.data(), 1e-5f, y.data(), rstd.data());
    benchmark::DoNotOptimize(y.data());
  }
}

void BM_rmsnorm_backward(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 16);
  const auto x = random_vec(kTokens * kHidden, 1), w = random_vec(kHidden, 2),
             dy = random_vec(kTokens * kHidden, 3);
  Floats y(x.size()), rstd(kTokens), dx(x.size()), dw(kHidden);
  k::rmsnorm_forward(kTokens, kHidden, x.data(), w.data(), 1e-5f, y.data(), rstd.data());
  for (auto _ : state) {
    k::rmsnorm_backward(kTokens, kHidden, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                        dw.data());
    benchmark::DoNotOptimize(dx.data());
  }
}

void BM_rmsnorm_forward_bf16(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 4);
  const auto x = random_bf16(kTokens * kHidden, 1);
  const auto w = random_vec(kHidden, 2);
  Bf16s y(x.size());
  Floats rstd(kTokens);
  for (auto _ : state) {
    k::rmsnorm_forward_bf16(kTokens, kHidden, x.data(), w.data(), 1e-5f, y.data(), rstd.data());
    benchmark::DoNotOptimize(y.data());
  }
}

void BM_rmsnorm_backward_bf16(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 8);
  const auto x = random_bf16(kTokens * kHidden, 1), dy = random_bf16(kTokens * kHidden, 3);
  const auto w = random_vec(kHidden, 2);
  Bf16s y(x.size()), dx(x.size());
  Floats rstd(kTokens), dw(kHidden);
  k::rmsnorm_forward_bf16(kTokens, kHidden, x.data(), w.data(), 1e-5f, y.data(), rstd.data());
  for (auto _ : state) {
    k::rmsnorm_backward_bf16(kTokens, kHidden, x.data(), w.data(), rstd.data(), dy.data(),
                             dx.data(), dw.data());
    benchmark::DoNotOptimize(dx.data());
  }
}

// RMSNorm forward on activations beyond the last-level cache (65536 tokens of h = 1024: 256 MiB
// in and out in fp32, half that in bf16), where the bytes moved set the time.
constexpr std::int64_t kLargeTokens = 65536, kLargeHidden = 1024;

void BM_rmsnorm_forward_large(benchmark::State& state) {
  Scope scope(state, kLargeTokens * kLargeHidden, 8);
  const auto x = random_vec(kLargeTokens * kLargeHidden, 1), w = random_vec(kLargeHidden, 2);
  Floats y(x.size()), rstd(kLargeTokens);
  for (auto _ : state) {
    k::rmsnorm_forward(kLargeTokens, kLargeHidden, x.data(), w.data(), 1e-5f, y.data(),
                       rstd.data());
    benchmark::DoNotOptimize(y.data());
  }
}

void BM_rmsnorm_forward_large_bf16(benchmark::State& state) {
  Scope scope(state, kLargeTokens * kLargeHidden, 4);
  const auto x = random_bf16(kLargeTokens * kLargeHidden, 1);
  const auto w = random_vec(kLargeHidden, 2);
  Bf16s y(x.size());
  Floats rstd(kLargeTokens);
  for (auto _ : state) {
    k::rmsnorm_forward_bf16(kLargeTokens, kLargeHidden, x.data(), w.data(), 1e-5f, y.data(),
                            rstd.data());
    benchmark::DoNotOptimize(y.data());
  }
}

// SwiGLU forward on 16384 tokens of the intermediate size 2752 (4 x 688): 172 MiB in fp32
// (a, u, g), beyond the cache.
constexpr std::int64_t kLargeFfn = 16384 * 2752;

void BM_swiglu_forward_large(benchmark::State& state) {
  Scope scope(state, kLargeFfn, 12);
  const auto a = random_vec(kLargeFfn, 5, -4, 4), u = random_vec(kLargeFfn, 6);
  Floats g(a.size());
  for (auto _ : state) {
    k::swiglu_forward(kLargeFfn, a.data(), u.data(), g.data());
    benchmark::DoNotOptimize(g.data());
  }
}

void BM_swiglu_forward_large_bf16(benchmark::State& state) {
  Scope scope(state, kLargeFfn, 6);
  const auto a = random_bf16(kLargeFfn, 5, -4, 4), u = random_bf16(kLargeFfn, 6);
  Bf16s g(a.size());
  for (auto _ : state) {
    k::swiglu_forward_bf16(kLargeFfn, a.data(), u.data(), g.data());
    benchmark::DoNotOptimize(g.data());
  }
}

void BM_rope_forward_q(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 8);
  Floats cos_t(kTokens * kHeadDim / 2), sin_t(cos_t.size());
  k::rope_table(kTokens, kHeadDim, 10000.0, cos_t.data(), sin_t.data());
  std::vector<std::int64_t> pos(kTokens);
  for (std::int64_t s = 0; s < kTokens; ++s) pos[static_cast<std::size_t>(s)] = s;
  auto q = random_vec(kTokens * kHidden, 4);
  for (auto _ : state) {
    k::rope_forward(1, kTokens, kHeads, kHeadDim, pos.data(), cos_t.data(), sin_t.data(), q.data());
    benchmark::DoNotOptimize(q.data());
  }
}

void BM_rope_forward_q_bf16(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 4);
  Floats cos_t(kTokens * kHeadDim / 2), sin_t(cos_t.size());
  k::rope_table(kTokens, kHeadDim, 10000.0, cos_t.data(), sin_t.data());
  std::vector<std::int64_t> pos(kTokens);
  for (std::int64_t s = 0; s < kTokens; ++s) pos[static_cast<std::size_t>(s)] = s;
  auto q = random_bf16(kTokens * kHidden, 4);
  for (auto _ : state) {
    k::rope_forward_bf16(1, kTokens, kHeads, kHeadDim, pos.data(), cos_t.data(), sin_t.data(),
                         q.data());
    benchmark::DoNotOptimize(q.data());
  }
}

void BM_swiglu_forward(benchmark::State& state) {
  Scope scope(state, kTokens * kFfn, 12);
  const auto a = random_vec(kTokens * kFfn, 5, -4, 4), u = random_vec(kTokens * kFfn, 6);
  Floats g(a.size());
  for (auto _ : state) {
    k::swiglu_forward(kTokens * kFfn, a.data(), u.data(), g.data());
    benchmark::DoNotOptimize(g.data());
  }
}

void BM_swiglu_forward_bf16(benchmark::State& state) {
  Scope scope(state, kTokens * kFfn, 6);
  const auto a = random_bf16(kTokens * kFfn, 5, -4, 4), u = random_bf16(kTokens * kFfn, 6);
  Bf16s g(a.size());
  for (auto _ : state) {
    k::swiglu_forward_bf16(kTokens * kFfn, a.data(), u.data(), g.data());
    benchmark::DoNotOptimize(g.data());
  }
}

void BM_swiglu_backward(benchmark::State& state) {
  Scope scope(state, kTokens * kFfn, 28);
  const auto a = random_vec(kTokens * kFfn, 5, -4, 4), u = random_vec(kTokens * kFfn, 6),
             dg = random_vec(kTokens * kFfn, 7);
  Floats da(a.size()), du(a.size());
  for (auto _ : state) {
    k::swiglu_backward(kTokens * kFfn, a.data(), u.data(), dg.data(), da.data(), du.data());
    benchmark::DoNotOptimize(da.data());
  }
}

void BM_swiglu_backward_bf16(benchmark::State& state) {
  Scope scope(state, kTokens * kFfn, 14);
  const auto a = random_bf16(kTokens * kFfn, 5, -4, 4), u = random_bf16(kTokens * kFfn, 6),
             dg = random_bf16(kTokens * kFfn, 7);
  Bf16s da(a.size()), du(a.size());
  for (auto _ : state) {
    k::swiglu_backward_bf16(kTokens * kFfn, a.data(), u.data(), dg.data(), da.data(), du.data());
    benchmark::DoNotOptimize(da.data());
  }
}

void BM_embedding_forward_backward(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 8);
  const auto table = random_vec(kVocab * kHidden, 8), dout = random_vec(kTokens * kHidden, 9);
  std::vector<std::int32_t> ids(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) ids[static_cast<std::size_t>(t)] = std::int32_t((t * 37) % kVocab);
  Floats out(kTokens * kHidden), dtable(table.size());
  for (auto _ : state) {
    k::embedding_forward(kTokens, kHidden, ids.data(), table.data(), 0, kVocab, out.data());
    k::embedding_backward(kTokens, kHidden, ids.data(), dout.data(), 0, kVocab, dtable.data());
    benchmark::DoNotOptimize(dtable.data());
  }
}

// The gather alone (the table in cache, the rows written): the fp32 row that the bf16 one is set
// against.
void BM_embedding_forward(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 4);
  const auto table = random_vec(kVocab * kHidden, 8);
  std::vector<std::int32_t> ids(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) ids[static_cast<std::size_t>(t)] = std::int32_t((t * 37) % kVocab);
  Floats out(kTokens * kHidden);
  for (auto _ : state) {
    k::embedding_forward(kTokens, kHidden, ids.data(), table.data(), 0, kVocab, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_embedding_forward_bf16(benchmark::State& state) {
  Scope scope(state, kTokens * kHidden, 2);
  const auto table = random_bf16(kVocab * kHidden, 8);
  std::vector<std::int32_t> ids(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) ids[static_cast<std::size_t>(t)] = std::int32_t((t * 37) % kVocab);
  Bf16s out(kTokens * kHidden);
  for (auto _ : state) {
    k::embedding_forward_bf16(kTokens, kHidden, ids.data(), table.data(), 0, kVocab, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_cross_entropy_stats(benchmark::State& state) {
  Scope scope(state, kTokens * kVocab, 4);
  const auto logits = random_vec(kTokens * kVocab, 10, -5, 5);
  std::vector<std::int32_t> targets(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) targets[static_cast<std::size_t>(t)] = std::int32_t((t * 11) % kVocab);
  Floats rm(kTokens), rs(kTokens), tl(kTokens), lse(kTokens);
  for (auto _ : state) {
    std::fill(rm.begin(), rm.end(), -std::numeric_limits<float>::infinity());
    std::fill(rs.begin(), rs.end(), 0.0f);
    k::softmax_stats_update(kTokens, kVocab, logits.data(), 0, kVocab, targets.data(), rm.data(),
                            rs.data(), tl.data());
    benchmark::DoNotOptimize(k::softmax_stats_finish(kTokens, rm.data(), rs.data(), tl.data(),
                                                     targets.data(), lse.data()));
  }
}

void BM_cross_entropy_backward_inplace(benchmark::State& state) {
  Scope scope(state, kTokens * kVocab, 8);
  const auto logits = random_vec(kTokens * kVocab, 10, -5, 5);
  std::vector<std::int32_t> targets(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) targets[static_cast<std::size_t>(t)] = std::int32_t((t * 11) % kVocab);
  Floats lse(kTokens);
  k::cross_entropy_forward(kTokens, kVocab, logits.data(), targets.data(), lse.data());
  auto buf = logits;
  for (auto _ : state) {
    k::cross_entropy_backward(kTokens, kVocab, buf.data(), 0, kVocab, targets.data(), lse.data(),
                              1.0f / kTokens, buf.data());
    benchmark::DoNotOptimize(buf.data());
  }
}

// One layer's parameters: 4 h^2 (attention) + 3 h f (MLP).
constexpr std::int64_t kLayerParams = 4 * kHidden * kHidden + 3 * kHidden * kFfn;

void BM_adamw_step_one_layer(benchmark::State& state) {
  Scope scope(state, kLayerParams, 28);
  auto p = random_vec(kLayerParams, 11);
  const auto g = random_vec(kLayerParams, 12);
  Floats m(p.size()), v(p.size());
  std::int64_t step = 0;
  for (auto _ : state) {
    k::adamw_step(kLayerParams, p.data(), g.data(), m.data(), v.data(), k::AdamWHyper{}, ++step);
    benchmark::DoNotOptimize(p.data());
  }
}

void BM_sum_of_squares_one_layer(benchmark::State& state) {
  Scope scope(state, kLayerParams, 4);
  const auto g = random_vec(kLayerParams, 12);
  for (auto _ : state) benchmark::DoNotOptimize(k::sum_of_squares(kLayerParams, g.data()));
}

// The communicator's reduction kernels: acc = op(acc, in) over one layer's float gradient
// (12 bytes per element: acc read and written, in read).
void reduce_bench(benchmark::State& state, origami::comm::ReduceOp op) {
  Scope scope(state, kLayerParams, 12);
  const auto in = random_vec(kLayerParams, 13);
  auto acc = random_vec(kLayerParams, 14);
  const auto reducer = origami::comm::detail::make_reducer(op, origami::DType::F32);
  for (auto _ : state) {
    reducer.combine(acc.data(), in.data(), kLayerParams);
    benchmark::DoNotOptimize(acc.data());
  }
}
void BM_comm_reduce_sum_f32(benchmark::State& state) {
  reduce_bench(state, origami::comm::ReduceOp::Sum);
}
void BM_comm_reduce_max_f32(benchmark::State& state) {
  reduce_bench(state, origami::comm::ReduceOp::Max);
}

#define ORIGAMI_KERNEL_BENCH(fn) \
  BENCHMARK(fn)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond)

ORIGAMI_KERNEL_BENCH(BM_rmsnorm_forward);
ORIGAMI_KERNEL_BENCH(BM_rmsnorm_forward_bf16);
ORIGAMI_KERNEL_BENCH(BM_rmsnorm_forward_large);
ORIGAMI_KERNEL_BENCH(BM_rmsnorm_forward_large_bf16);
ORIGAMI_KERNEL_BENCH(BM_rmsnorm_backward);
ORIGAMI_KERNEL_BENCH(BM_rmsnorm_backward_bf16);
ORIGAMI_KERNEL_BENCH(BM_rope_forward_q);
ORIGAMI_KERNEL_BENCH(BM_rope_forward_q_bf16);
ORIGAMI_KERNEL_BENCH(BM_swiglu_forward);
ORIGAMI_KERNEL_BENCH(BM_swiglu_forward_bf16);
ORIGAMI_KERNEL_BENCH(BM_swiglu_forward_large);
ORIGAMI_KERNEL_BENCH(BM_swiglu_forward_large_bf16);
ORIGAMI_KERNEL_BENCH(BM_swiglu_backward);
ORIGAMI_KERNEL_BENCH(BM_swiglu_backward_bf16);
ORIGAMI_KERNEL_BENCH(BM_embedding_forward_backward);
ORIGAMI_KERNEL_BENCH(BM_embedding_forward);
ORIGAMI_KERNEL_BENCH(BM_embedding_forward_bf16);
ORIGAMI_KERNEL_BENCH(BM_cross_entropy_stats);
ORIGAMI_KERNEL_BENCH(BM_cross_entropy_backward_inplace);
ORIGAMI_KERNEL_BENCH(BM_adamw_step_one_layer);
ORIGAMI_KERNEL_BENCH(BM_sum_of_squares_one_layer);
ORIGAMI_KERNEL_BENCH(BM_comm_reduce_sum_f32);
ORIGAMI_KERNEL_BENCH(BM_comm_reduce_max_f32);

}  // namespace

ORIGAMI_SIMD_BENCHMARK_MAIN()
