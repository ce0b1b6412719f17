// The attention's vector building blocks (attention_simd-inl.h) on every SIMD target of the
// machine: exp2 keeps its stated accuracy and gives exact zeros for masked scores and NaN for
// NaN; the register-blocked tile product equals a float64 product for every row count and
// column count it is cut into, with A or A^T and each way of treating the existing C, and so
// does its trimmed form.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_simd_test.cpp"  // tests/ is on the include path
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/attention_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::attn::HWY_NAMESPACE {

void CheckExp2() {
  const DF d;
  std::vector<float> x(kFloatLanes), y(kFloatLanes);
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x0 = -126.0f + 126.0f * static_cast<float>(i) / 200000.0f;
    for (std::int64_t l = 0; l < kFloatLanes; ++l) x[l] = x0 - 1e-3f * static_cast<float>(l);
    store(y.data(), exp2_approx(load(x.data())));
    for (std::int64_t l = 0; l < kFloatLanes; ++l) {
      if (x[l] < -126.0f) continue;
      const double want = std::exp2(static_cast<double>(x[l]));
      worst = std::max(worst, std::abs(y[l] - want) / want);
    }
  }
  EXPECT_LT(worst, 3e-7);
  // Special values, lane by lane (the first lanes of a vector of -inf).
  const float specials[] = {-std::numeric_limits<float>::infinity(), -127.0f, -1000.0f, 0.0f,
                            std::numeric_limits<float>::quiet_NaN()};
  const float want[] = {0.0f, 0.0f, 0.0f, 1.0f};
  for (std::size_t s = 0; s < std::size(specials); ++s) {
    std::fill(x.begin(), x.end(), -std::numeric_limits<float>::infinity());
    x[0] = specials[s];
    store(y.data(), exp2_approx(load(x.data())));
    if (s < std::size(want)) {
      EXPECT_EQ(y[0], want[s]) << "exp2(" << specials[s] << ")";
    } else {
      EXPECT_TRUE(std::isnan(y[0])) << "exp2(NaN) = " << y[0];
    }
    for (std::int64_t l = 1; l < kFloatLanes; ++l) EXPECT_EQ(y[l], 0.0f);
  }
  (void)d;
}

void CheckTileProduct() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Row counts around every register block (6 and 12), column counts of 1 to 7 paddings.
  for (std::int64_t rows : {1, 5, 6, 7, 12, 13, 25}) {
    for (std::int64_t cols = kTilePad; cols <= 7 * kTilePad; cols += kTilePad) {
      for (const bool transposed : {false, true}) {
        for (const Init init : {Init::Zero, Init::Accumulate, Init::ScaleRows}) {
          const std::int64_t K = 19, ldb = cols + 3, ldc = cols + 5;
          std::vector<float> A(static_cast<std::size_t>(rows * K)), B(K * ldb), C(rows * ldc),
              scale(rows);
          for (float& v : A) v = u(rng);
          for (float& v : B) v = u(rng);
          for (float& v : C) v = u(rng);
          for (float& v : scale) v = u(rng);
          const std::int64_t a_rs = transposed ? 1 : K, a_ks = transposed ? rows : 1;
          std::vector<double> want(C.begin(), C.end());
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
              double sum = 0.0;
              for (std::int64_t k = 0; k < K; ++k)
                sum += static_cast<double>(A[r * a_rs + k * a_ks]) * B[k * ldb + c];
              double& w = want[r * ldc + c];
              w = init == Init::Zero ? sum
                  : init == Init::Accumulate ? w + sum
                                             : static_cast<double>(scale[r]) * w + sum;
            }
          }
          tile_product(rows, cols, K, A.data(), a_rs, a_ks, B.data(), ldb, C.data(), ldc, init,
                       scale.data());
          double worst = 0.0;
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < ldc; ++c) {
              const double w = want[r * ldc + c];
              worst = std::max(worst, std::abs(C[r * ldc + c] - w) / (1.0 + std::abs(w)));
            }
          }
          // 19 products of values below 1: a few ulp; columns past `cols` untouched (exact).
          EXPECT_LT(worst, 1e-6) << fmt::format("rows {} cols {} A^T {} init {}", rows, cols,
                                                transposed, static_cast<int>(init));
        }
      }
    }
  }
}

// The trimmed product (diagonal tiles): with A zero outside each row's [k_begin, k_end) (the
// contract: those terms are exact zeros), every needed element equals the float64 product,
// whatever the row groups' unions of ranges; rows past rows_of_vector may be left unwritten,
// and if written hold the product too.
void CheckTrimmedTileProduct() {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::int64_t rows : {1, 7, 13, 25}) {
    for (std::int64_t cols = kTilePad; cols <= 7 * kTilePad; cols += 2 * kTilePad) {
      for (const bool transposed : {false, true}) {
        for (const Init init : {Init::Zero, Init::Accumulate, Init::ScaleRows}) {
          const std::int64_t K = 37, ldb = cols + 3, ldc = cols + 5, vectors = cols / kFloatLanes;
          std::vector<std::int64_t> k_begin(rows), k_end(rows), rows_of_vector(vectors);
          for (std::int64_t r = 0; r < rows; ++r) {
            k_begin[r] = static_cast<std::int64_t>(rng() % (K + 1));
            k_end[r] = k_begin[r] + static_cast<std::int64_t>(rng() % (K + 1 - k_begin[r]));
          }
          for (auto& n : rows_of_vector) n = static_cast<std::int64_t>(rng() % (rows + 1));
          const std::int64_t a_rs = transposed ? 1 : K, a_ks = transposed ? rows : 1;
          std::vector<float> A(static_cast<std::size_t>(rows * K)), B(K * ldb), C(rows * ldc),
              scale(rows);
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t k = 0; k < K; ++k)
              A[r * a_rs + k * a_ks] = k >= k_begin[r] && k < k_end[r] ? u(rng) : 0.0f;
          }
          for (float& v : B) v = u(rng);
          for (float& v : C) v = u(rng);
          for (float& v : scale) v = u(rng);
          const std::vector<float> C0 = C;
          std::vector<double> want(C.begin(), C.end());
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
              double sum = 0.0;
              for (std::int64_t k = 0; k < K; ++k)
                sum += static_cast<double>(A[r * a_rs + k * a_ks]) * B[k * ldb + c];
              double& w = want[r * ldc + c];
              w = init == Init::Zero ? sum
                  : init == Init::Accumulate ? w + sum
                                             : static_cast<double>(scale[r]) * w + sum;
            }
          }
          TileTrim trim;
          trim.k_begin = k_begin.data();
          trim.k_end = k_end.data();
          trim.rows_of_vector = rows_of_vector.data();
          tile_product_trimmed(rows, cols, K, A.data(), a_rs, a_ks, B.data(), ldb, C.data(), ldc,
                               init, scale.data(), trim);
          double worst = 0.0;
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < ldc; ++c) {
              const std::size_t i = static_cast<std::size_t>(r * ldc + c);
              const double err = std::abs(C[i] - want[i]) / (1.0 + std::abs(want[i]));
              const bool needed = c < cols && r < rows_of_vector[c / kFloatLanes];
              if (needed || C[i] != C0[i]) worst = std::max(worst, err);
            }
          }
          EXPECT_LT(worst, 1e-6) << fmt::format("rows {} cols {} A^T {} init {}", rows, cols,
                                                transposed, static_cast<int>(init));
        }
      }
    }
  }
}

}  // namespace origami::kernels::attn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "origami/core/error.h"
#include "origami/kernels/simd.h"
#include "simd_targets.h"

namespace origami::kernels::attn {
HWY_EXPORT(CheckExp2);
HWY_EXPORT(CheckTileProduct);
HWY_EXPORT(CheckTrimmedTileProduct);

class AttentionSimd : public testing::OnEverySimdTarget {};

TEST_P(AttentionSimd, Exp2AccurateAndZeroBelowRange) { HWY_DYNAMIC_DISPATCH(CheckExp2)(); }
TEST_P(AttentionSimd, TileProductEqualsFloat64) { HWY_DYNAMIC_DISPATCH(CheckTileProduct)(); }
TEST_P(AttentionSimd, TrimmedTileProductEqualsFloat64) {
  HWY_DYNAMIC_DISPATCH(CheckTrimmedTileProduct)();
}

ORIGAMI_ON_EVERY_SIMD_TARGET(AttentionSimd);

// The dispatch follows a restriction: each target of the machine is the one the kernels run on
// while it is chosen.
TEST(SimdDispatch, EachTargetCanBeChosen) {
  const std::vector<std::string> targets = simd_targets();
  ASSERT_FALSE(targets.empty());
  const std::string best = simd_target();
  EXPECT_EQ(best, targets.front());
  for (const std::string& t : targets) {
    use_simd_target(t);
    EXPECT_EQ(simd_target(), t);
  }
  use_simd_target("");
  EXPECT_EQ(simd_target(), best);
  EXPECT_THROW(use_simd_target("no-such-target"), ConfigError);
}
}  // namespace origami::kernels::attn
#endif  // HWY_ONCE
