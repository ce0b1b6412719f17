// C = alpha * op(A) @ op(B) + beta * C with bf16 A and B, fp32 C and fp32 accumulation
// (kernels/gemm.h). Two paths, chosen once per product shape:
//   native      oneDNN's matmul primitive on bf16 inputs, where the CPU has bf16 dot products
//               (AVX512_BF16 or AMX) — a primitive per shape, cached per thread (ranks are
//               threads: none is shared);
//   converting  elsewhere (AVX-512 without BF16, AVX2 and older): blocks of A and B widened to
//               fp32 in a fixed per-thread scratch and multiplied by sgemm, so that bf16 costs
//               there what fp32 does plus the widening.
// Both accumulate in fp32; they may differ from each other in the last bits of C (summation
// order), never in what is rounded: the inputs are bf16 either way.
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/omp_sync.h"

namespace origami::kernels {

namespace {

void check(dnnl_status_t s, const char* what) {
  ORIGAMI_CHECK(s == dnnl_success, "gemm_bf16: {} failed with dnnl status {}", what,
                static_cast<int>(s));
}

dnnl_engine_t cpu_engine() {
  static const dnnl_engine_t engine = [] {
    dnnl_engine_t e = nullptr;
    check(dnnl_engine_create(&e, dnnl_cpu, 0), "dnnl_engine_create");
    return e;
  }();
  return engine;
}

// oneDNN's bf16 matmul is only worth taking with bf16 dot products (AVX512_BF16, AMX): on
// AVX-512 without them its emulation measured 0.37x of sgemm (docs/results-kernels.md), and on
// AVX2 it has only reference code. ONEDNN_MAX_CPU_ISA is honoured, as for sgemm.
bool has_bf16_dot_products() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
}

// Element (i, j) of op(X) for a stored row-major X with leading dimension ld: the strides of
// op(X)'s two dimensions.
std::array<dnnl_dim_t, 2> op_strides(Trans t, std::int64_t ld) {
  return t == Trans::N ? std::array<dnnl_dim_t, 2>{ld, 1} : std::array<dnnl_dim_t, 2>{1, ld};
}

struct Shape {
  char ta, tb;
  std::int64_t M, N, K, lda, ldb, ldc;
  std::uint32_t alpha, beta;  // bits: the primitive bakes both in
  auto operator<=>(const Shape&) const = default;
};

// One shape's primitive, or nullptr where oneDNN has only its reference code for it.
struct Primitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{};
  std::string impl;
};

class PrimitiveCache {
 public:
  ~PrimitiveCache() {
    for (auto& [shape, p] : cache_)
      if (p.primitive != nullptr) dnnl_primitive_destroy(p.primitive);
    if (stream_ != nullptr) dnnl_stream_destroy(stream_);
  }

  const Primitive& get(const Shape& s) {
    auto it = cache_.find(s);
    if (it != cache_.end()) return it->second;
    // Shapes are few in a run (a handful per layer kind); bound the cache anyway.
    if (cache_.size() >= kMaxShapes) clear();
    return cache_.emplace(s, create(s)).first->second;
  }

  dnnl_stream_t stream() {
    if (stream_ == nullptr)
      check(dnnl_stream_create(&stream_, cpu_engine(), dnnl_stream_default_flags),
            "dnnl_stream_create");
    return stream_;
  }

 private:
  static constexpr std::size_t kMaxShapes = 256;

  void clear() {
    for (auto& [shape, p] : cache_)
      if (p.primitive != nullptr) dnnl_primitive_destroy(p.primitive);
    cache_.clear();
  }

  static Primitive create(const Shape& s) {
    Primitive p;
    const dnnl_dims_t a_dims = {s.M, s.K}, b_dims = {s.K, s.N}, c_dims = {s.M, s.N};
    const auto as = op_strides(static_cast<Trans>(s.ta), s.lda);
    const auto bs = op_strides(static_cast<Trans>(s.tb), s.ldb);
    const dnnl_dims_t a_strides = {as[0], as[1]}, b_strides = {bs[0], bs[1]}, c_strides = {s.ldc, 1};
    check(dnnl_memory_desc_init_by_strides(&p.a, 2, a_dims, dnnl_bf16, a_strides), "A desc");
    check(dnnl_memory_desc_init_by_strides(&p.b, 2, b_dims, dnnl_bf16, b_strides), "B desc");
    check(dnnl_memory_desc_init_by_strides(&p.c, 2, c_dims, dnnl_f32, c_strides), "C desc");
    dnnl_matmul_desc_t desc;
    check(dnnl_matmul_desc_init(&desc, &p.a, &p.b, nullptr, &p.c), "dnnl_matmul_desc_init");

    dnnl_primitive_attr_t attr = nullptr;
    check(dnnl_primitive_attr_create(&attr), "attr");
    const float alpha = std::bit_cast<float>(s.alpha), beta = std::bit_cast<float>(s.beta);
    if (alpha != 1.0f) check(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "alpha");
    dnnl_post_ops_t post_ops = nullptr;
    if (beta != 0.0f) {
      // beta = 0 has no sum: C is then write-only and may hold anything (NaN) on entry.
      check(dnnl_post_ops_create(&post_ops), "post ops");
      check(dnnl_post_ops_append_sum(post_ops, beta), "beta");
      check(dnnl_primitive_attr_set_post_ops(attr, post_ops), "post ops");
    }
    dnnl_primitive_desc_t pd = nullptr;
    const dnnl_status_t made = dnnl_primitive_desc_create(&pd, &desc, attr, cpu_engine(), nullptr);
    if (post_ops != nullptr) dnnl_post_ops_destroy(post_ops);
    dnnl_primitive_attr_destroy(attr);
    if (made != dnnl_success) return p;  // no implementation at all: the converting path
    const char* impl = nullptr;
    check(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl), "impl query");
    p.impl = impl != nullptr ? impl : "";
    if (has_bf16_dot_products() && !p.impl.starts_with("ref"))
      check(dnnl_primitive_create(&p.primitive, pd), "primitive");
    dnnl_primitive_desc_destroy(pd);
    return p;
  }

  std::map<Shape, Primitive> cache_;
  dnnl_stream_t stream_ = nullptr;
};

thread_local PrimitiveCache t_cache;
bool g_force_conversion = false;

void run_native(const Primitive& p, const bf16* A, const bf16* B, float* C, PrimitiveCache& cache) {
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
  check(dnnl_memory_create(&a, &p.a, cpu_engine(), const_cast<bf16*>(A)), "A memory");
  check(dnnl_memory_create(&b, &p.b, cpu_engine(), const_cast<bf16*>(B)), "B memory");
  check(dnnl_memory_create(&c, &p.c, cpu_engine(), C), "C memory");
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  const dnnl_status_t ran = dnnl_primitive_execute(p.primitive, cache.stream(), 3, args);
  const dnnl_status_t waited = dnnl_stream_wait(cache.stream());
  dnnl_memory_destroy(a);
  dnnl_memory_destroy(b);
  dnnl_memory_destroy(c);
  check(ran, "dnnl_primitive_execute");
  check(waited, "dnnl_stream_wait");
}

// Widens the part of the stored X that holds op(X)'s rows [r0, r0 + rows) and columns
// [c0, c0 + cols) into out, stored the same way (row-major, transposed or not): returns out's
// leading dimension. The transpose is left to sgemm, so every widening is of contiguous rows.
std::int64_t widen_block(Trans t, const bf16* X, std::int64_t ld, std::int64_t r0, std::int64_t c0,
                         std::int64_t rows, std::int64_t cols, float* out) {
  const bool n = t == Trans::N;
  const std::int64_t stored_rows = n ? rows : cols, stored_cols = n ? cols : rows;
  const bf16* first = n ? X + r0 * ld + c0 : X + c0 * ld + r0;
  for (std::int64_t i = 0; i < stored_rows; ++i)
    convert_to_float(stored_cols, first + i * ld, out + i * stored_cols);
  return stored_cols;
}

void run_converting(Trans ta, Trans tb, std::int64_t M, std::int64_t N, std::int64_t K,
                    float alpha, const bf16* A, std::int64_t lda, const bf16* B,
                    std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  // Each block of B is widened once and each block of A once per kBlockN columns of C: about
  // 1/(2M) + 1/(2 kBlockN) widenings per flop. Scratch: 4 MiB of fp32 per thread that takes
  // this path (smaller blocks measured up to 1.7x slower than sgemm with oneDNN's AVX2 code:
  // its sgemm pays per call).
  constexpr std::int64_t kBlockK = 512, kBlockM = 1024, kBlockN = 1024;
  thread_local std::vector<float> a_block(kBlockM * kBlockK), b_block(kBlockK * kBlockN);
  for (std::int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const std::int64_t kb = std::min(kBlockK, K - k0);
    const float beta_here = k0 == 0 ? beta : 1.0f;  // later K blocks add to the first's C
    for (std::int64_t n0 = 0; n0 < N; n0 += kBlockN) {
      const std::int64_t nb = std::min(kBlockN, N - n0);
      const std::int64_t ldb_block = widen_block(tb, B, ldb, k0, n0, kb, nb, b_block.data());
      for (std::int64_t m0 = 0; m0 < M; m0 += kBlockM) {
        const std::int64_t mb = std::min(kBlockM, M - m0);
        const std::int64_t lda_block = widen_block(ta, A, lda, m0, k0, mb, kb, a_block.data());
        gemm(ta, tb, mb, nb, kb, alpha, a_block.data(), lda_block, b_block.data(), ldb_block,
             beta_here, C + m0 * ldc + n0, ldc);
      }
    }
  }
}

}  // namespace

void gemm_bf16(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               float alpha, const bf16* A, std::int64_t lda, const bf16* B, std::int64_t ldb,
               float beta, float* C, std::int64_t ldc) {
  // Dry run: the same 2MNK as an fp32 product (reading A and B once, at half the bytes).
  if (dryrun::skip_kernel(gemm_flops(M, N, K), static_cast<double>(M * K + K * N) / 2)) return;
  detail::check_gemm_shape("gemm_bf16", trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  ORIGAMI_CHECK(C != nullptr, "gemm_bf16: C is null for a {}x{} result", M, N);
  if (K == 0 || alpha == 0.0f) {
    // The product term is an empty sum: C = beta * C, which the fp32 gemm already does.
    gemm(Trans::N, Trans::N, M, N, 0, 0.0f, nullptr, 1, nullptr, std::max<std::int64_t>(1, N),
         beta, C, ldc);
    return;
  }
  ORIGAMI_CHECK(A != nullptr && B != nullptr, "gemm_bf16: A or B is null for M={} N={} K={}", M,
                N, K);
  detail::sync_omp_threads();
  if (!g_force_conversion) {
    const Shape shape{static_cast<char>(trans_a), static_cast<char>(trans_b), M, N, K, lda, ldb,
                      ldc, std::bit_cast<std::uint32_t>(alpha), std::bit_cast<std::uint32_t>(beta)};
    const Primitive& p = t_cache.get(shape);
    if (p.primitive != nullptr) {
      run_native(p, A, B, C, t_cache);
      return;
    }
  }
  run_converting(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

std::string gemm_bf16_path() {
  if (g_force_conversion) return "converting (forced)";
  // A representative shape: the linear layers' x @ W^T.
  const Shape shape{'N', 'T', 256, 256, 256, 256, 256, 256, std::bit_cast<std::uint32_t>(1.0f),
                    std::bit_cast<std::uint32_t>(0.0f)};
  const Primitive& p = t_cache.get(shape);
  return p.primitive != nullptr ? "native (oneDNN " + p.impl + ")"
                                : std::string(has_bf16_dot_products()
                                                  ? "converting (oneDNN has no bf16 matmul here)"
                                                  : "converting (no bf16 dot products on this CPU)");
}

bool gemm_bf16_native() { return !g_force_conversion && has_bf16_dot_products(); }

void force_gemm_bf16_conversion(bool on) { g_force_conversion = on; }

}  // namespace origami::kernels
