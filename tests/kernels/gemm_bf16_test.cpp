// gemm_bf16 on both of its paths (oneDNN's bf16 matmul, and blocks widened to fp32) against
// float64 on the same bf16-rounded inputs. Tolerances: 1e-5 relative L2 against the float64
// product of the rounded inputs (what fp32 accumulation allows, as for the fp32 gemm), and
// 5e-3 against the float64 product of the unrounded fp32 inputs (each input carries bf16's
// relative rounding error of at most 2^-9 = 2e-3; independent errors give about that in L2).
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/bf16.h"
#include "origami/core/error.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"
#include "gemm_reference.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::RelClose;
using testing::random_floats;

std::vector<bf16> to_bf16s(const std::vector<float>& x) {
  std::vector<bf16> b(x.size());
  convert_to_bf16(static_cast<std::int64_t>(x.size()), x.data(), b.data());
  return b;
}

std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = round_to_bf16(x[i]);
  return r;
}

struct Case {
  std::int64_t M, N, K;
};

// (transpose of A, transpose of B, converting path forced)
class GemmBf16 : public ::testing::TestWithParam<std::tuple<char, char, bool>> {
 protected:
  void SetUp() override { force_gemm_bf16_conversion(std::get<2>(GetParam())); }
  void TearDown() override { force_gemm_bf16_conversion(false); }
};

TEST_P(GemmBf16, MatchesFloat64OnTheRoundedInputs) {
  const Trans ta = static_cast<Trans>(std::get<0>(GetParam()));
  const Trans tb = static_cast<Trans>(std::get<1>(GetParam()));
  std::mt19937 rng(4321);
  // 300 and 600 cross the converting path's 256-blocks in every dimension.
  for (const Case& c : {Case{1, 1, 1}, Case{3, 17, 33}, Case{17, 3, 257}, Case{33, 257, 3},
                       Case{1, 513, 65}, Case{300, 37, 600}, Case{45, 300, 301}}) {
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{1.5f, -0.5f},
                                     std::pair{-0.75f, 1.0f}}) {
      const std::int64_t a_rows = ta == Trans::N ? c.M : c.K, a_cols = ta == Trans::N ? c.K : c.M;
      const std::int64_t b_rows = tb == Trans::N ? c.K : c.N, b_cols = tb == Trans::N ? c.N : c.K;
      const std::int64_t lda = a_cols + 3, ldb = b_cols + 5, ldc = c.N + 2;
      const auto A = random_floats(rng, a_rows * lda);
      const auto B = random_floats(rng, b_rows * ldb);
      auto C = random_floats(rng, c.M * ldc);
      if (beta == 0.0f)
        for (std::int64_t i = 0; i < c.M; ++i)
          for (std::int64_t j = 0; j < c.N; ++j)
            C[static_cast<std::size_t>(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
      const auto exact = testing::gemm_reference(ta, tb, c.M, c.N, c.K, alpha, rounded(A), lda, rounded(B), ldb,
                                   beta, C, ldc);
      const auto unrounded = testing::gemm_reference(ta, tb, c.M, c.N, c.K, alpha, A, lda, B, ldb, beta, C, ldc);
      const auto Ab = to_bf16s(A), Bb = to_bf16s(B);
      gemm_bf16(ta, tb, c.M, c.N, c.K, alpha, Ab.data(), lda, Bb.data(), ldb, beta, C.data(), ldc);
      const std::string where = "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
                                " K=" + std::to_string(c.K) + " alpha=" + std::to_string(alpha) +
                                " beta=" + std::to_string(beta);
      EXPECT_TRUE(RelClose(C, exact)) << where;
      EXPECT_TRUE(RelClose(C, unrounded, 5e-3)) << where;
    }
  }
}

TEST_P(GemmBf16, EmptyProductsScaleC) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  gemm_bf16(Trans::N, Trans::N, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  gemm_bf16(Trans::N, Trans::N, 0, 2, 3, 1.0f, nullptr, 3, nullptr, 2, 0.0f, nullptr, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, GemmBf16,
    ::testing::Combine(::testing::Values('N', 'T'), ::testing::Values('N', 'T'), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<char, char, bool>>& info) {
      return std::string(1, std::get<0>(info.param)) + std::get<1>(info.param) +
             (std::get<2>(info.param) ? "_converting" : "_native");
    });

TEST(GemmBf16Checks, BadLeadingDimensionsAreRefused) {
  std::vector<bf16> A(6), B(6);
  std::vector<float> C(4);
  EXPECT_THROW(gemm_bf16(Trans::N, Trans::N, 2, 2, 3, 1.0f, A.data(), 2, B.data(), 2, 0.0f,
                         C.data(), 2),
               Error);
}

TEST(GemmBf16Checks, NamesItsPath) {
  const std::string path = gemm_bf16_path();
  EXPECT_TRUE(path.starts_with("native (oneDNN ") || path.starts_with("converting (")) << path;
  force_gemm_bf16_conversion(true);
  EXPECT_EQ(gemm_bf16_path(), "converting (forced)");
  force_gemm_bf16_conversion(false);
}

}  // namespace
}  // namespace origami::kernels
