#include "origami/kernels/gemm.h"

#include <algorithm>

#include <oneapi/dnnl/dnnl.h>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/omp_sync.h"

namespace origami::kernels {

namespace {

bool transposed(Trans t) { return t == Trans::T; }

// Columns of the stored (not the transposed) matrix: its leading dimension must cover them.
std::int64_t stored_cols(Trans t, std::int64_t rows_of_op, std::int64_t cols_of_op) {
  return transposed(t) ? rows_of_op : cols_of_op;
}

// C = beta * C for the K = 0 case (the product term is an empty sum).
void scale_c(std::int64_t M, std::int64_t N, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + N, 0.0f);  // beta = 0 must not read C (it may be uninitialised)
    } else {
      for (std::int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
}

}  // namespace

namespace detail {
void check_gemm_shape(const char* name, Trans trans_a, Trans trans_b, std::int64_t M,
                      std::int64_t N, std::int64_t K, std::int64_t lda, std::int64_t ldb,
                      std::int64_t ldc) {
  ORIGAMI_CHECK(M >= 0 && N >= 0 && K >= 0, "{}: negative size M={} N={} K={}", name, M, N, K);
  const std::int64_t a_cols = stored_cols(trans_a, M, K);
  const std::int64_t b_cols = stored_cols(trans_b, K, N);
  ORIGAMI_CHECK(lda >= std::max<std::int64_t>(1, a_cols),
                "{}: lda={} is smaller than the {} columns of the stored A", name, lda, a_cols);
  ORIGAMI_CHECK(ldb >= std::max<std::int64_t>(1, b_cols),
                "{}: ldb={} is smaller than the {} columns of the stored B", name, ldb, b_cols);
  ORIGAMI_CHECK(ldc >= std::max<std::int64_t>(1, N),
                "{}: ldc={} is smaller than the {} columns of C", name, ldc, N);
}
}  // namespace detail

void gemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
          float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
          float beta, float* C, std::int64_t ldc) {
  // Dry run: 2MNK charged (or reading A and B once, when a memory bandwidth is set).
  if (dryrun::skip_kernel(gemm_flops(M, N, K), static_cast<double>(M * K + K * N))) return;
  detail::check_gemm_shape("gemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  ORIGAMI_CHECK(C != nullptr, "gemm: C is null for a {}x{} result", M, N);
  if (K == 0 || alpha == 0.0f) {
    // Nothing to multiply; oneDNN is not asked about empty products.
    scale_c(M, N, beta, C, ldc);
    return;
  }
  ORIGAMI_CHECK(A != nullptr && B != nullptr, "gemm: A or B is null for M={} N={} K={}", M, N, K);
  detail::sync_omp_threads();
  const dnnl_status_t status =
      dnnl_sgemm(static_cast<char>(trans_a), static_cast<char>(trans_b), M, N, K, alpha, A, lda,
                 B, ldb, beta, C, ldc);
  ORIGAMI_CHECK(status == dnnl_success,
                "dnnl_sgemm(transa={}, transb={}, M={}, N={}, K={}, lda={}, ldb={}, ldc={}) failed "
                "with dnnl status {}",
                static_cast<char>(trans_a), static_cast<char>(trans_b), M, N, K, lda, ldb, ldc,
                static_cast<int>(status));
}

void linear_forward(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                    WeightView W, float* y, bool accumulate) {
  if (W.is_bf16()) return detail::linear_forward_bf16(rows, in, out, x, W.bf16s(), y, accumulate);
  gemm(Trans::N, Trans::T, rows, out, in, 1.0f, x, std::max<std::int64_t>(1, in), W.f32(),
       std::max<std::int64_t>(1, in), accumulate ? 1.0f : 0.0f, y,
       std::max<std::int64_t>(1, out));
}

void linear_backward_input(std::int64_t rows, std::int64_t in, std::int64_t out, const float* dy,
                           WeightView W, float* dx) {
  if (W.is_bf16()) return detail::linear_backward_input_bf16(rows, in, out, dy, W.bf16s(), dx);
  gemm(Trans::N, Trans::N, rows, in, out, 1.0f, dy, std::max<std::int64_t>(1, out), W.f32(),
       std::max<std::int64_t>(1, in), 1.0f, dx, std::max<std::int64_t>(1, in));
}

void linear_backward_weight(std::int64_t rows, std::int64_t in, std::int64_t out, const float* dy,
                            const float* x, float* dW, DType compute) {
  if (compute == DType::BF16 && gemm_bf16_native())
    return detail::linear_backward_weight_bf16(rows, in, out, dy, x, dW);
  gemm(Trans::T, Trans::N, out, in, rows, 1.0f, dy, std::max<std::int64_t>(1, out), x,
       std::max<std::int64_t>(1, in), 1.0f, dW, std::max<std::int64_t>(1, in));
}

}  // namespace origami::kernels
