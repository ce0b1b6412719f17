#include "origami/kernels/gemm.h"

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "gemm_reference.h"
#include "test_util.h"

namespace origami::kernels {

// Prints a transpose as gtest's parameter ("N" or "T"; found by argument-dependent lookup).
static void PrintTo(Trans t, std::ostream* os) { *os << static_cast<char>(t); }

namespace {

using testing::RelClose;
using testing::gemm_reference;
using testing::random_floats;

struct Case {
  std::int64_t M, N, K;
};

class GemmAllTransposes : public ::testing::TestWithParam<std::tuple<Trans, Trans>> {};

TEST_P(GemmAllTransposes, MatchesFloat64ReferenceWithPaddedLeadingDimensions) {
  const auto [ta, tb] = GetParam();
  std::mt19937 rng(1234);
  for (const Case& c : {Case{1, 1, 1}, Case{3, 17, 33}, Case{17, 3, 257}, Case{33, 257, 3},
                       Case{64, 48, 96}, Case{1, 33, 17}}) {
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{1.5f, -0.5f},
                                     std::pair{-0.75f, 1.0f}}) {
      // Stored shapes, each row padded by a few elements that the product must not touch.
      const std::int64_t a_rows = ta == Trans::N ? c.M : c.K, a_cols = ta == Trans::N ? c.K : c.M;
      const std::int64_t b_rows = tb == Trans::N ? c.K : c.N, b_cols = tb == Trans::N ? c.N : c.K;
      const std::int64_t lda = a_cols + 3, ldb = b_cols + 5, ldc = c.N + 2;
      const auto A = random_floats(rng, a_rows * lda);
      const auto B = random_floats(rng, b_rows * ldb);
      auto C = random_floats(rng, c.M * ldc);
      if (beta == 0.0f) {
        // beta = 0 must not read C: poison the view (the padding keeps its values).
        for (std::int64_t i = 0; i < c.M; ++i)
          for (std::int64_t j = 0; j < c.N; ++j)
            C[static_cast<std::size_t>(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
      }
      const auto ref = gemm_reference(ta, tb, c.M, c.N, c.K, alpha, A, lda, B, ldb, beta, C, ldc);
      gemm(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      EXPECT_TRUE(RelClose(C, ref)) << "M=" << c.M << " N=" << c.N << " K=" << c.K
                                    << " alpha=" << alpha << " beta=" << beta;
    }
  }
}

// Names such as "NT": op(A) not transposed, op(B) transposed.
std::string transposes_name(const ::testing::TestParamInfo<std::tuple<Trans, Trans>>& info) {
  std::string name(2, ' ');
  name[0] = static_cast<char>(std::get<0>(info.param));
  name[1] = static_cast<char>(std::get<1>(info.param));
  return name;
}

INSTANTIATE_TEST_SUITE_P(Transposes, GemmAllTransposes,
                         ::testing::Combine(::testing::Values(Trans::N, Trans::T),
                                            ::testing::Values(Trans::N, Trans::T)),
                         transposes_name);

TEST(Gemm, ZeroSizes) {
  std::vector<float> A(12, 1.0f), B(12, 1.0f), C(12, 7.0f);
  // M or N = 0: nothing is written.
  gemm(Trans::N, Trans::N, 0, 3, 4, 1.0f, A.data(), 4, B.data(), 3, 0.0f, C.data(), 3);
  gemm(Trans::N, Trans::N, 3, 0, 4, 1.0f, A.data(), 4, B.data(), 1, 0.0f, C.data(), 1);
  for (float v : C) EXPECT_EQ(v, 7.0f);
  // K = 0: C = beta * C, the product being an empty sum.
  gemm(Trans::N, Trans::N, 2, 3, 0, 1.0f, nullptr, 1, nullptr, 3, 0.5f, C.data(), 3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(C[static_cast<std::size_t>(i)], 3.5f);
  for (int i = 6; i < 12; ++i) EXPECT_EQ(C[static_cast<std::size_t>(i)], 7.0f);
  std::vector<float> poisoned(6, std::numeric_limits<float>::quiet_NaN());
  gemm(Trans::T, Trans::T, 2, 3, 0, 1.0f, nullptr, 2, nullptr, 1, 0.0f, poisoned.data(), 3);
  for (float v : poisoned) EXPECT_EQ(v, 0.0f);
  // All three zero, null pointers: fine.
  gemm(Trans::N, Trans::T, 0, 0, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1);
}

TEST(Gemm, RejectsBadLeadingDimensionsAndSizes) {
  std::vector<float> A(64, 1.0f), B(64, 1.0f), C(64, 0.0f);
  EXPECT_THROW(gemm(Trans::N, Trans::N, 4, 4, 4, 1.0f, A.data(), 3, B.data(), 4, 0.0f, C.data(), 4),
               Error);  // lda < K
  EXPECT_THROW(gemm(Trans::T, Trans::N, 5, 4, 4, 1.0f, A.data(), 4, B.data(), 4, 0.0f, C.data(), 4),
               Error);  // transposed A is K x M: lda < M
  EXPECT_THROW(gemm(Trans::N, Trans::T, 4, 5, 4, 1.0f, A.data(), 4, B.data(), 3, 0.0f, C.data(), 5),
               Error);  // transposed B is N x K: ldb < K
  EXPECT_THROW(gemm(Trans::N, Trans::N, 4, 4, 4, 1.0f, A.data(), 4, B.data(), 4, 0.0f, C.data(), 3),
               Error);  // ldc < N
  EXPECT_THROW(gemm(Trans::N, Trans::N, -1, 4, 4, 1.0f, A.data(), 4, B.data(), 4, 0.0f, C.data(), 4),
               Error);
}

// The linear wrappers against explicit float64 loops, with the accumulate convention.
TEST(Linear, ForwardAndBothBackwardsMatchReferenceAndAccumulate) {
  std::mt19937 rng(99);
  for (const auto& [rows, in, out] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1},
                                     {3, 17, 33}, {33, 257, 17}, {17, 5, 3}}) {
    const auto x = random_floats(rng, rows * in);
    const auto W = random_floats(rng, out * in);
    const auto dy = random_floats(rng, rows * out);
    const auto y0 = random_floats(rng, rows * out);
    const auto dx0 = random_floats(rng, rows * in);
    const auto dW0 = random_floats(rng, out * in);
    std::vector<double> y_ref(y0.size()), dx_ref(dx0.begin(), dx0.end()),
        dW_ref(dW0.begin(), dW0.end());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out; ++o) {
        double s = 0.0;
        for (std::int64_t i = 0; i < in; ++i)
          s += double(x[static_cast<std::size_t>(r * in + i)]) * W[static_cast<std::size_t>(o * in + i)];
        y_ref[static_cast<std::size_t>(r * out + o)] = s;
        for (std::int64_t i = 0; i < in; ++i) {
          dx_ref[static_cast<std::size_t>(r * in + i)] += double(dy[static_cast<std::size_t>(r * out + o)]) * W[static_cast<std::size_t>(o * in + i)];
          dW_ref[static_cast<std::size_t>(o * in + i)] += double(dy[static_cast<std::size_t>(r * out + o)]) * x[static_cast<std::size_t>(r * in + i)];
        }
      }
    auto y = y0;  // overwritten
    linear_forward(rows, in, out, x.data(), W.data(), y.data());
    EXPECT_TRUE(RelClose(y, y_ref));
    auto y_acc = y0;  // accumulated
    linear_forward(rows, in, out, x.data(), W.data(), y_acc.data(), /*accumulate=*/true);
    std::vector<double> y_acc_ref(y0.size());
    for (std::size_t i = 0; i < y0.size(); ++i) y_acc_ref[i] = y0[i] + y_ref[i];
    EXPECT_TRUE(RelClose(y_acc, y_acc_ref));
    auto dx = dx0;
    linear_backward_input(rows, in, out, dy.data(), W.data(), dx.data());
    EXPECT_TRUE(RelClose(dx, dx_ref));
    auto dW = dW0;
    linear_backward_weight(rows, in, out, dy.data(), x.data(), dW.data());
    EXPECT_TRUE(RelClose(dW, dW_ref));
  }
}

TEST(Linear, ZeroRowsLeaveGradientsUntouched) {
  std::vector<float> W(6, 1.0f), dW(6, 2.0f);
  linear_forward(0, 3, 2, nullptr, W.data(), nullptr);
  linear_backward_input(0, 3, 2, nullptr, W.data(), nullptr);
  linear_backward_weight(0, 3, 2, nullptr, nullptr, dW.data());
  for (float v : dW) EXPECT_EQ(v, 2.0f);
}

TEST(Gemm, OneAndTwoThreadsAgree) {
  std::mt19937 rng(7);
  const std::int64_t M = 257, N = 129, K = 300;
  const auto A = random_floats(rng, M * K), B = random_floats(rng, K * N);
  std::vector<float> c1(static_cast<std::size_t>(M * N)), c2(static_cast<std::size_t>(M * N));
  {
    testing::ThreadCountScope one(1);
    gemm(Trans::N, Trans::N, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c1.data(), N);
  }
  {
    testing::ThreadCountScope two(2);
    gemm(Trans::N, Trans::N, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c2.data(), N);
  }
  EXPECT_LE(testing::rel_l2(c2, c1), 1e-6);
}

}  // namespace
}  // namespace origami::kernels
