// The float64 reference of a matrix product C = alpha op(A) op(B) + beta C, shared by the
// fp32 and bf16 gemm tests (a bf16 test passes its inputs already rounded to bf16).
#pragma once

#include <cstdint>
#include <vector>

#include "origami/kernels/gemm.h"

namespace origami::kernels::testing {

// Element (i, j) of op(X) for a row-major X with leading dimension ld.
inline double op_at(Trans t, const std::vector<float>& X, std::int64_t ld, std::int64_t i,
                    std::int64_t j) {
  return t == Trans::N ? X[static_cast<std::size_t>(i * ld + j)]
                       : X[static_cast<std::size_t>(j * ld + i)];
}

// The float64 reference over the whole stored C (elements outside the M x N view unchanged).
inline std::vector<double> gemm_reference(Trans ta, Trans tb, std::int64_t M, std::int64_t N,
                                          std::int64_t K, double alpha, const std::vector<float>& A,
                                          std::int64_t lda, const std::vector<float>& B,
                                          std::int64_t ldb, double beta,
                                          const std::vector<float>& C, std::int64_t ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0.0;
      for (std::int64_t k = 0; k < K; ++k) s += op_at(ta, A, lda, i, k) * op_at(tb, B, ldb, k, j);
      const double c = beta == 0.0 ? 0.0 : beta * C[static_cast<std::size_t>(i * ldc + j)];
      out[static_cast<std::size_t>(i * ldc + j)] = alpha * s + c;
    }
  return out;
}

}  // namespace origami::kernels::testing
