// linear_forward with a bf16 W (the bf16 prefill's products) on both of its paths, against a
// float64 reference on fresh random inputs, odd sizes and sizes across the scratch's row
// blocks (x: 4 MiB of bf16 rows, W: 4 MiB of fp32 rows). Per element, with u = 2^-24 (fp32)
// and gamma(n) = n u / (1 - n u), y0 the accumulated output (0 without accumulate):
//   native    x is rounded to bf16 (xb) and multiplied with fp32 accumulation:
//             |y - (y0 + sum xb w)| <= gamma(K+1) (|y0| + sum |xb w|), and against the
//             unrounded x that plus 2^-8 sum |x w| (bf16's unit roundoff, once per x);
//   widening  W widened exactly and the fp32 gemm on the unrounded x:
//             |y - (y0 + sum x w)| <= gamma(K+1) (|y0| + sum |x w|).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/bf16.h"
#include "origami/core/error.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

struct Case {
  std::int64_t rows, in, out;
};

double gamma(std::int64_t n) {
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

// Counts the elements of y outside the bound of the header, against x as given.
int violations(const Case& c, const std::vector<float>& x, const std::vector<float>& w,
               const std::vector<float>& y0, const std::vector<float>& y, double extra_rel,
               const std::vector<float>& x_unrounded, std::string& first) {
  int bad = 0;
  for (std::int64_t r = 0; r < c.rows; ++r)
    for (std::int64_t o = 0; o < c.out; ++o) {
      double e = y0[static_cast<std::size_t>(r * c.out + o)], mag = std::abs(e), mag_x = 0.0;
      for (std::int64_t k = 0; k < c.in; ++k) {
        const double xk = x[static_cast<std::size_t>(r * c.in + k)];
        const double wk = w[static_cast<std::size_t>(o * c.in + k)];
        e += xk * wk;
        mag += std::abs(xk * wk);
        mag_x += std::abs(static_cast<double>(x_unrounded[static_cast<std::size_t>(r * c.in + k)]) * wk);
      }
      const double got = y[static_cast<std::size_t>(r * c.out + o)];
      const double bound = gamma(c.in + 1) * mag + extra_rel * mag_x;
      if (!(std::abs(got - e) <= bound) && bad++ == 0)
        first = "row " + std::to_string(r) + " out " + std::to_string(o) + ": " +
                std::to_string(got) + " vs " + std::to_string(e) + " (bound " +
                std::to_string(bound) + ")";
    }
  return bad;
}

// Parameter: the widening path forced (as on a CPU without bf16 dot products).
class LinearBf16 : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { force_gemm_bf16_conversion(GetParam()); }
  void TearDown() override { force_gemm_bf16_conversion(false); }
};

TEST_P(LinearBf16, MatchesFloat64WithinTheBoundOfItsPath) {
  const bool native = gemm_bf16_native();
  EXPECT_EQ(linear_forward_bf16_path().starts_with("bf16 matmul"), native);
  if (GetParam()) {
    EXPECT_FALSE(native);
  }
  std::random_device seed_source;
  const unsigned seed = seed_source();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // 1100 x 2049 crosses the native path's x blocks (1023 rows), 2049 x 600 the widening path's
  // W blocks (511 rows).
  for (const Case& c : {Case{1, 1, 1}, Case{3, 33, 17}, Case{17, 257, 5}, Case{45, 301, 300},
                       Case{5, 2049, 600}, Case{1100, 2049, 3}}) {
    for (const bool accumulate : {false, true}) {
      const auto x = testing::random_floats(rng, c.rows * c.in);
      const auto w32 = testing::random_floats(rng, c.out * c.in);
      std::vector<bf16> w(w32.size());
      convert_to_bf16(static_cast<std::int64_t>(w.size()), w32.data(), w.data());
      std::vector<float> wv(w.size()), xb(x.size());
      convert_to_float(static_cast<std::int64_t>(w.size()), w.data(), wv.data());
      for (std::size_t i = 0; i < x.size(); ++i) xb[i] = round_to_bf16(x[i]);
      const std::vector<float> y0 =
          accumulate ? testing::random_floats(rng, c.rows * c.out)
                     : std::vector<float>(static_cast<std::size_t>(c.rows * c.out), 0.0f);
      std::vector<float> y = y0;
      linear_forward(c.rows, c.in, c.out, x.data(), w.data(), y.data(), accumulate);
      const std::string where = "rows " + std::to_string(c.rows) + " in " + std::to_string(c.in) +
                                " out " + std::to_string(c.out) +
                                (accumulate ? " accumulate" : "");
      std::string first;
      EXPECT_EQ(violations(c, native ? xb : x, wv, y0, y, 0.0, x, first), 0) << where << ": " << first;
      if (native) {  // the activations' one rounding, against the unrounded x
        EXPECT_EQ(violations(c, x, wv, y0, y, std::ldexp(1.0, -8), x, first), 0)
            << where << " (unrounded x): " << first;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, LinearBf16, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "widening_forced" : "this_cpu");
                         });

TEST(LinearBf16Checks, Fp32ReadOfABf16WeightThrows) {
  const std::vector<bf16> w(4);
  const WeightView v(w.data());
  EXPECT_TRUE(v.is_bf16());
  EXPECT_THROW(static_cast<void>(v.f32()), Error);
  EXPECT_EQ(v.at(3).bf16s(), w.data() + 3);
  EXPECT_EQ(WeightView(nullptr).at(5).raw(), nullptr);  // a dry run's unbacked shard
}

}  // namespace
}  // namespace origami::kernels
