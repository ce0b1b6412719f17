#include "origami/kernels/optimizer.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::RelClose;
using testing::random_floats;

// torch.optim.AdamW's update written out in float64.
struct AdamRef {
  std::vector<double> p, m, v;
  void step(const std::vector<float>& g, const AdamWHyper& hp, int t) {
    const double lr = hp.lr, b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps, wd = hp.weight_decay;
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1.0 - lr * wd;
      m[i] = b1 * m[i] + (1.0 - b1) * g[i];
      v[i] = b2 * v[i] + (1.0 - b2) * double(g[i]) * g[i];
      const double denom = std::sqrt(v[i]) / std::sqrt(1.0 - std::pow(b2, t)) + eps;
      p[i] -= lr / (1.0 - std::pow(b1, t)) * m[i] / denom;
    }
  }
};

// The kernel tests run on every SIMD target of the machine (simd_targets.h).
class AdamW : public testing::OnEverySimdTarget {};
class GradNorm : public testing::OnEverySimdTarget {};

TEST_P(AdamW, ThreeStepsMatchTorchFormulaInFloat64) {
  std::mt19937 rng(61);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  hp.weight_decay = 0.1f;
  for (const float weight_decay : {0.1f, 0.0f})
    for (const float grad_scale : {1.0f, 1e-6f})  // tiny gradients: eps matters
      for (std::int64_t n : {1, 3, 17, 257, 40000}) {
        hp.weight_decay = weight_decay;
        const auto p0 = random_floats(rng, n);
        auto p = p0;
        std::vector<float> m(static_cast<std::size_t>(n), 0.0f), v(static_cast<std::size_t>(n), 0.0f);
        AdamRef ref{testing::to_double(p0), std::vector<double>(static_cast<std::size_t>(n)), std::vector<double>(static_cast<std::size_t>(n))};
        for (int t = 1; t <= 3; ++t) {
          const auto g = random_floats(rng, n, -grad_scale, grad_scale);
          adamw_step(n, p.data(), g.data(), m.data(), v.data(), hp, t);
          ref.step(g, hp, t);
        }
        // The parameters move by ~lr per step: compare the change as well as the values.
        std::vector<float> delta(static_cast<std::size_t>(n));
        std::vector<double> delta_ref(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
          delta[i] = p[i] - p0[i];
          delta_ref[i] = ref.p[i] - p0[i];
        }
        EXPECT_TRUE(RelClose(p, ref.p)) << n;
        EXPECT_TRUE(RelClose(delta, delta_ref, 1e-4)) << n << " wd=" << weight_decay << " g~" << grad_scale;
        EXPECT_TRUE(RelClose(m, ref.m)) << n;
        EXPECT_TRUE(RelClose(v, ref.v)) << n;
      }
}

// Golden values from torch 1.13 (the python3-torch installed here; adamw_golden.py):
//   p = Parameter(float32([0.1 (i+1) - 0.3])), AdamW([p], lr=1e-2, betas=(0.9, 0.95),
//   eps=1e-8, weight_decay=0.1); three steps with grad_t[i] = float32(sin(i + 3t) 10^-(i%4)).
TEST_P(AdamW, MatchesTorchGoldenValues) {
  constexpr int n = 7;
  const float p_torch[n] = {-2.091353685e-01f, -8.635254949e-02f, 1.262348145e-02f, 1.106809154e-01f,
                            1.858746707e-01f, 2.863864899e-01f, 3.872473240e-01f};
  const float m_torch[n] = {2.749517560e-02f, -5.657431670e-03f, -8.862964460e-04f, -3.919928713e-05f,
                            4.627071694e-02f, 8.919963613e-03f, 5.011881585e-04f};
  const float v_torch[n] = {1.309920847e-02f, 6.114577991e-04f, 1.379874902e-05f, 2.598604887e-08f,
                            4.236243293e-02f, 1.407339121e-03f, 4.248356618e-06f};
  AdamWHyper hp;
  hp.lr = 1e-2f;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.95f;
  hp.eps = 1e-8f;
  hp.weight_decay = 0.1f;
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f), g(n);
  for (int i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = static_cast<float>(0.1 * (i + 1) - 0.3);
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < n; ++i)
      g[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(i + 3.0 * t) * std::pow(10.0, -(i % 4)));
    adamw_step(n, p.data(), g.data(), m.data(), v.data(), hp, t);
  }
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    // Same operations in the same order; within 4 ulp (EXPECT_FLOAT_EQ), not bitwise: torch's
    // vectorised CPU kernels fuse some multiply-adds (a few elements differ by 1-2 ulp).
    EXPECT_FLOAT_EQ(p[k], p_torch[i]) << i;
    EXPECT_FLOAT_EQ(m[k], m_torch[i]) << i;
    EXPECT_FLOAT_EQ(v[k], v_torch[i]) << i;
  }
}

TEST_P(AdamW, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(62);
  const std::int64_t n = 100003;
  const auto p0 = random_floats(rng, n), g = random_floats(rng, n);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    auto p = p0;
    std::vector<float> m(static_cast<std::size_t>(n), 0.0f), v(static_cast<std::size_t>(n), 0.0f);
    for (int t = 1; t <= 2; ++t) adamw_step(n, p.data(), g.data(), m.data(), v.data(), AdamWHyper{}, t);
    scale_inplace(n, p.data(), 0.5f);
    p.insert(p.end(), m.begin(), m.end());
    p.insert(p.end(), v.begin(), v.end());
    return p;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

// bf16 gradients (--grad-reduce-dtype bf16): the step is bitwise the fp32 step on the widened
// gradients, at lengths around the vector widths, one thread or two.
TEST_P(AdamW, Bf16GradientsStepAsTheirWidenedValues) {
  std::mt19937 rng(65);
  for (std::int64_t n : {1, 7, 33, 100003}) {
    const auto p0 = random_floats(rng, n), g32 = random_floats(rng, n);
    std::vector<bf16> g(g32.size());
    std::vector<float> widened(g32.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      g[i] = to_bf16(g32[i]);
      widened[i] = to_float(g[i]);
    }
    for (int threads : {1, 2}) {
      testing::ThreadCountScope scope(threads);
      auto p = p0, q = p0;
      const auto z = std::vector<float>(static_cast<std::size_t>(n), 0.0f);
      auto m = z, v = z, mq = z, vq = z;
      for (int t = 1; t <= 2; ++t) {
        adamw_step(n, p.data(), g.data(), m.data(), v.data(), AdamWHyper{}, t);
        adamw_step(n, q.data(), widened.data(), mq.data(), vq.data(), AdamWHyper{}, t);
      }
      EXPECT_TRUE(testing::bitwise_equal(p, q)) << n << " " << threads;
      EXPECT_TRUE(testing::bitwise_equal(m, mq) && testing::bitwise_equal(v, vq)) << n;
    }
  }
}

TEST(AdamWChecks, RejectsBadArguments) {
  float p = 1.0f, g = 1.0f, m = 0.0f, v = 0.0f;
  EXPECT_THROW(adamw_step(1, &p, &g, &m, &v, AdamWHyper{}, 0), Error);  // steps are 1-based
  AdamWHyper bad;
  bad.beta2 = 1.0f;
  EXPECT_THROW(adamw_step(1, &p, &g, &m, &v, bad, 1), Error);
  adamw_step(0, nullptr, static_cast<const float*>(nullptr), nullptr, nullptr, AdamWHyper{}, 1);
}

TEST_P(GradNorm, SumOfSquaresIsExactInDouble) {
  std::mt19937 rng(63);
  for (std::int64_t n : {0, 1, 3, 17, 257, 100003}) {
    const auto x = random_floats(rng, n, -3.0f, 3.0f);
    long double exact = 0.0L;
    for (float xi : x) exact += static_cast<long double>(xi) * xi;
    EXPECT_NEAR(sum_of_squares(n, x.data()), double(exact), 1e-12 * double(exact) + 1e-300) << n;
  }
}

TEST(GradNormClip, ClipCoefficientAsTorch) {
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 1.0), float(1.0 / (4.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_coefficient(10.0, 2.5), float(2.5 / (10.0 + 1e-6)));
  EXPECT_TRUE(std::isnan(clip_coefficient(std::nan(""), 1.0)));
  EXPECT_EQ(clip_coefficient(INFINITY, 1.0), 0.0f);
  EXPECT_THROW(clip_coefficient(1.0, 0.0), Error);
  EXPECT_THROW(clip_coefficient(-1.0, 1.0), Error);
}

TEST_P(GradNorm, ScaleInPlace) {
  std::mt19937 rng(64);
  const auto x0 = random_floats(rng, 257);
  auto x = x0;
  scale_inplace(257, x.data(), 0.25f);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], x0[i] * 0.25f);
  scale_inplace(0, static_cast<float*>(nullptr), 2.0f);
}

// bf16: the squares of the widened values (exact in double), and the product rounded once.
TEST_P(GradNorm, Bf16SumOfSquaresAndScale) {
  std::mt19937 rng(66);
  for (std::int64_t n : {0, 1, 3, 17, 257, 100003}) {
    const auto x32 = random_floats(rng, n, -3.0f, 3.0f);
    std::vector<bf16> x(x32.size());
    long double exact = 0.0L;
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = to_bf16(x32[i]);
      exact += static_cast<long double>(to_float(x[i])) * to_float(x[i]);
    }
    EXPECT_NEAR(sum_of_squares(n, x.data()), double(exact), 1e-12 * double(exact) + 1e-300) << n;
    auto y = x;
    scale_inplace(n, y.data(), 0.3f);
    for (std::size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(y[i], to_bf16(to_float(x[i]) * 0.3f)) << n << " " << i;
  }
}

ORIGAMI_ON_EVERY_SIMD_TARGET(AdamW);
ORIGAMI_ON_EVERY_SIMD_TARGET(GradNorm);

}  // namespace
}  // namespace origami::kernels
