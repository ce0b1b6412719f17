// The backward products of a linear computing in bf16 (training under --precision bf16,
// kernels/gemm.h) on both paths, against a float64 reference of the operands as the path
// rounds them, on fresh random inputs, odd sizes and sizes across the scratch's blocks. Both
// products accumulate into an existing fp32 output (c0, random). Per element, with
// u = 2^-24 and gamma(n) = n u / (1 - n u), K the product's inner dimension:
//   |c - (c0 + sum a b)| <= gamma(K + 1) (|c0| + sum |a b|)
// where, for dx = dy W: a = dy rounded to bf16 (native) or dy (widening), b = the bf16 W; and
// for dW = dy^T x: a, b = dy and x rounded to bf16 (native) or as given (widening: the fp32
// gemm, no weight among the operands). Any fp32 summation order of K + 1 terms stays inside
// gamma(K + 1); a product that read an unrounded operand on the native path, or rounded one on
// the widening path, is off by up to 2^-9 of its magnitude, ~10^4 times that bound.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/bf16.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

double gamma(std::int64_t n) {
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = round_to_bf16(v[i]);
  return out;
}

// C[M,N] = C0 + A[M,K] B[K,N] with element (i,k) of A at a[i*sa_i + k*sa_k] (and likewise B):
// the elements of c outside the header's bound, the first one described in `first`.
struct Operand {
  const std::vector<float>* v;
  std::int64_t s_row, s_col;
  double at(std::int64_t i, std::int64_t j) const {
    return (*v)[static_cast<std::size_t>(i * s_row + j * s_col)];
  }
};
int violations(std::int64_t M, std::int64_t N, std::int64_t K, Operand a, Operand b,
               const std::vector<float>& c0, const std::vector<float>& c, std::string& first) {
  int bad = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double e = c0[static_cast<std::size_t>(i * N + j)], mag = std::abs(e);
      for (std::int64_t k = 0; k < K; ++k) {
        e += a.at(i, k) * b.at(k, j);
        mag += std::abs(a.at(i, k) * b.at(k, j));
      }
      const double got = c[static_cast<std::size_t>(i * N + j)];
      if (!(std::abs(got - e) <= gamma(K + 1) * mag) && bad++ == 0)
        first = "(" + std::to_string(i) + ", " + std::to_string(j) + "): " + std::to_string(got) +
                " vs " + std::to_string(e);
    }
  return bad;
}

struct Case {
  std::int64_t rows, in, out;
};

// Parameter: the widening path forced (as on a CPU without bf16 dot products).
class LinearBf16Backward : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { force_gemm_bf16_conversion(GetParam()); }
  void TearDown() override { force_gemm_bf16_conversion(false); }
};

TEST_P(LinearBf16Backward, MatchesFloat64OfTheRoundedOperands) {
  const bool native = gemm_bf16_native();
  if (GetParam()) {
    EXPECT_FALSE(native);
  }
  std::random_device seed_source;
  const unsigned seed = seed_source();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // Blocks crossed: native dx by dy's rows (1100 rows of out 2049 > 1023), native dW by token
  // rows (1100 > 1022 for in + out = 2052), widening dx by W's rows (out 600 > 511 of in 2049).
  for (const Case& c : {Case{1, 1, 1}, Case{3, 33, 17}, Case{17, 257, 5}, Case{45, 301, 300},
                        Case{5, 2049, 600}, Case{1100, 3, 2049}, Case{1100, 2049, 3}}) {
    const std::string where = "rows " + std::to_string(c.rows) + " in " + std::to_string(c.in) +
                              " out " + std::to_string(c.out);
    const auto dy = testing::random_floats(rng, c.rows * c.out);
    const auto x = testing::random_floats(rng, c.rows * c.in);
    const auto w32 = testing::random_floats(rng, c.out * c.in);
    std::vector<bf16> w(w32.size());
    convert_to_bf16(static_cast<std::int64_t>(w.size()), w32.data(), w.data());
    std::vector<float> wv(w.size());
    convert_to_float(static_cast<std::int64_t>(w.size()), w.data(), wv.data());
    const std::vector<float> dyr = native ? rounded(dy) : dy, xr = native ? rounded(x) : x;
    std::string first;
    {  // dx[rows,in] += dy[rows,out] W[out,in]
      const auto dx0 = testing::random_floats(rng, c.rows * c.in);
      std::vector<float> dx = dx0;
      linear_backward_input(c.rows, c.in, c.out, dy.data(), w.data(), dx.data());
      EXPECT_EQ(violations(c.rows, c.in, c.out, {&dyr, c.out, 1}, {&wv, c.in, 1}, dx0, dx, first),
                0)
          << where << " dx " << first;
    }
    {  // dW[out,in] += dy^T[out,rows] x[rows,in]
      const auto dw0 = testing::random_floats(rng, c.out * c.in);
      std::vector<float> dw = dw0;
      linear_backward_weight(c.rows, c.in, c.out, dy.data(), x.data(), dw.data(), DType::BF16);
      EXPECT_EQ(violations(c.out, c.in, c.rows, {&dyr, 1, c.out}, {&xr, c.in, 1}, dw0, dw, first),
                0)
          << where << " dW " << first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, LinearBf16Backward, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "widening_forced" : "this_cpu");
                         });

}  // namespace
}  // namespace origami::kernels
