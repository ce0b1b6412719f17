#include "origami/kernels/cross_entropy.h"

#include <cmath>
#include <limits>
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

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Full logits [tokens, padded]: only the first `valid` columns are vocabulary; the padding
// holds NaN so that any use of it shows.
struct Problem {
  std::int64_t tokens, valid, padded;
  std::vector<float> logits;
  std::vector<std::int32_t> targets;
};

Problem make_problem(std::mt19937& rng, std::int64_t tokens, std::int64_t valid,
                     std::int64_t padded, double masked_fraction, float spread = 4.0f) {
  Problem p{tokens, valid, padded, random_floats(rng, tokens * padded, -spread, spread), {}};
  std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(valid - 1));
  std::bernoulli_distribution masked(masked_fraction);
  for (std::int64_t t = 0; t < tokens; ++t) {
    p.targets.push_back(masked(rng) ? kIgnoreLabel : pick(rng));
    for (std::int64_t c = valid; c < padded; ++c) p.logits[static_cast<std::size_t>(t * padded + c)] = kNaN;
  }
  return p;
}

// Columns [c0, c0 + cols) of the full logits as a contiguous block.
std::vector<float> block_of(const Problem& p, std::int64_t c0, std::int64_t cols) {
  std::vector<float> b(static_cast<std::size_t>(p.tokens * cols));
  for (std::int64_t t = 0; t < p.tokens; ++t)
    for (std::int64_t c = 0; c < cols; ++c)
      b[static_cast<std::size_t>(t * cols + c)] = p.logits[static_cast<std::size_t>(t * p.padded + c0 + c)];
  return b;
}

struct Reference {
  std::vector<double> lse;
  double loss_sum = 0.0;
  std::int64_t count = 0;
  std::vector<double> dlogits;  // [tokens, padded] for the given scale
};

Reference reference(const Problem& p, const std::vector<double>& logits, double scale) {
  Reference r;
  r.dlogits.assign(logits.size(), 0.0);
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    const double* l = logits.data() + t * p.padded;
    double m = -INFINITY;
    for (std::int64_t c = 0; c < p.valid; ++c) m = std::max(m, l[c]);
    double s = 0.0;
    for (std::int64_t c = 0; c < p.valid; ++c) s += std::exp(l[c] - m);
    const double lse = m + std::log(s);
    r.lse.push_back(lse);
    const std::int32_t y = p.targets[static_cast<std::size_t>(t)];
    if (y == kIgnoreLabel) continue;
    r.loss_sum += lse - l[y];
    ++r.count;
    for (std::int64_t c = 0; c < p.valid; ++c)
      r.dlogits[static_cast<std::size_t>(t * p.padded + c)] = scale * (std::exp(l[c] - lse) - (c == y ? 1.0 : 0.0));
  }
  return r;
}

// Runs update over the given column blocks, then finish.
LossSum blockwise(const Problem& p, const std::vector<std::int64_t>& widths, std::vector<float>& lse) {
  std::vector<float> run_max(static_cast<std::size_t>(p.tokens), -kInf), run_sum(static_cast<std::size_t>(p.tokens), 0.0f),
      target_logit(static_cast<std::size_t>(p.tokens), kNaN);
  std::int64_t c0 = 0;
  for (std::int64_t w : widths) {
    const auto b = block_of(p, c0, w);
    softmax_stats_update(p.tokens, w, b.data(), c0, p.valid, p.targets.data(), run_max.data(),
                         run_sum.data(), target_logit.data());
    c0 += w;
  }
  EXPECT_EQ(c0, p.padded);
  lse.assign(static_cast<std::size_t>(p.tokens), 0.0f);
  return softmax_stats_finish(p.tokens, run_max.data(), run_sum.data(), target_logit.data(),
                              p.targets.data(), lse.data());
}

// The kernel tests run on every SIMD target of the machine (simd_targets.h).
class CrossEntropy : public testing::OnEverySimdTarget {};

TEST_P(CrossEntropy, ForwardMatchesFloat64Reference) {
  std::mt19937 rng(51);
  for (const auto& [tokens, vocab] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 3}, {17, 33},
                                     {257, 17}, {33, 257}}) {
    const auto p = make_problem(rng, tokens, vocab, vocab, 0.2);
    const auto ref = reference(p, testing::to_double(p.logits), 1.0);
    std::vector<float> lse(static_cast<std::size_t>(tokens));
    const LossSum got = cross_entropy_forward(tokens, vocab, p.logits.data(), p.targets.data(), lse.data());
    EXPECT_TRUE(RelClose(lse, ref.lse)) << tokens << "x" << vocab;
    EXPECT_EQ(got.count, ref.count);
    EXPECT_NEAR(got.sum, ref.loss_sum, 1e-5 * std::max(1.0, std::abs(ref.loss_sum)));
  }
}

TEST_P(CrossEntropy, BlockwiseStatsWithPaddingEqualOneBlockStats) {
  std::mt19937 rng(52);
  // 257 real columns padded to 264 (a multiple of D = 8); blocks of uneven widths, the last
  // one mostly padding, and a block of padding only.
  const auto p = make_problem(rng, 33, 257, 264, 0.25);
  const auto ref = reference(p, testing::to_double(p.logits), 1.0);
  std::vector<float> lse_blocks, lse_one;
  const LossSum blocks = blockwise(p, {1, 100, 150, 9, 4}, lse_blocks);
  const LossSum one = blockwise(p, {264}, lse_one);
  EXPECT_TRUE(RelClose(lse_blocks, ref.lse));
  EXPECT_TRUE(RelClose(lse_blocks, lse_one, 1e-6));
  EXPECT_EQ(blocks.count, ref.count);
  EXPECT_EQ(one.count, ref.count);
  EXPECT_NEAR(blocks.sum, ref.loss_sum, 1e-5 * std::abs(ref.loss_sum));
  EXPECT_NEAR(one.sum, ref.loss_sum, 1e-5 * std::abs(ref.loss_sum));
  // The convenience forward on the unpadded logits agrees with the one-block state.
  Problem unpadded = p;
  unpadded.padded = p.valid;
  unpadded.logits = block_of(p, 0, p.valid);
  std::vector<float> lse_fwd(static_cast<std::size_t>(p.tokens));
  const LossSum fwd = cross_entropy_forward(p.tokens, p.valid, unpadded.logits.data(), p.targets.data(), lse_fwd.data());
  EXPECT_TRUE(RelClose(lse_fwd, lse_one, 1e-6));
  EXPECT_NEAR(fwd.sum, one.sum, 1e-6 * std::abs(one.sum));
}

TEST_P(CrossEntropy, MergedPartialStatesEqualOnePass) {
  std::mt19937 rng(53);
  const auto p = make_problem(rng, 17, 61, 64, 0.1, 30.0f);  // wide spread: rescaling matters
  const std::int64_t split = 29;
  // Two ranks each see one disjoint column set and keep their own state.
  std::vector<float> max_a(17, -kInf), sum_a(17, 0.0f), tl(17, kNaN), max_b(17, -kInf), sum_b(17, 0.0f);
  const auto left = block_of(p, 0, split), right = block_of(p, split, 64 - split);
  softmax_stats_update(17, split, left.data(), 0, p.valid, p.targets.data(), max_a.data(), sum_a.data(), tl.data());
  softmax_stats_update(17, 64 - split, right.data(), split, p.valid, p.targets.data(), max_b.data(), sum_b.data(), tl.data());
  softmax_stats_merge(17, max_a.data(), sum_a.data(), max_b.data(), sum_b.data());
  std::vector<float> lse(17);
  const LossSum merged = softmax_stats_finish(17, max_a.data(), sum_a.data(), tl.data(), p.targets.data(), lse.data());
  const auto ref = reference(p, testing::to_double(p.logits), 1.0);
  EXPECT_TRUE(RelClose(lse, ref.lse));
  EXPECT_EQ(merged.count, ref.count);
  EXPECT_NEAR(merged.sum, ref.loss_sum, 1e-5 * std::abs(ref.loss_sum));
  // Merging an empty state (-inf, 0) changes nothing, in either direction.
  std::vector<float> empty_max(17, -kInf), empty_sum(17, 0.0f);
  auto m2 = max_a, s2 = sum_a;
  softmax_stats_merge(17, m2.data(), s2.data(), empty_max.data(), empty_sum.data());
  EXPECT_TRUE(testing::bitwise_equal(m2, max_a) && testing::bitwise_equal(s2, sum_a));
  softmax_stats_merge(17, empty_max.data(), empty_sum.data(), max_a.data(), sum_a.data());
  EXPECT_TRUE(testing::bitwise_equal(empty_max, max_a) && testing::bitwise_equal(empty_sum, sum_a));
}

TEST_P(CrossEntropy, LargeLogitsAreStable) {
  std::mt19937 rng(54);
  auto p = make_problem(rng, 5, 33, 33, 0.0);
  for (float& l : p.logits) l += 1000.0f;  // exp would overflow without the running max
  const auto ref = reference(p, testing::to_double(p.logits), 1.0);
  std::vector<float> lse;
  const LossSum got = blockwise(p, {16, 17}, lse);
  EXPECT_TRUE(RelClose(lse, ref.lse));
  EXPECT_NEAR(got.sum, ref.loss_sum, 1e-3);  // lse ~ 1000 in float: absolute error ~1e-4
}

TEST_P(CrossEntropy, BackwardMatchesFloat64ReferenceWithBlocksAndPadding) {
  std::mt19937 rng(55);
  for (const auto& [tokens, valid, padded] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1},
                                             {3, 3, 4}, {17, 33, 40}, {33, 257, 264}}) {
    const auto p = make_problem(rng, tokens, valid, padded, 0.2);
    std::vector<float> lse;
    const LossSum ls = blockwise(p, {padded}, lse);
    const float scale = ls.count > 0 ? 1.0f / float(ls.count) : 0.0f;
    const auto ref = reference(p, testing::to_double(p.logits), scale);
    // Backward per column block (as a vocabulary shard would), then reassembled.
    std::vector<float> grad(p.logits.size(), kNaN);
    const std::int64_t w0 = padded / 2;
    for (const auto& [c0, w] : {std::pair{std::int64_t{0}, w0}, std::pair{w0, padded - w0}}) {
      const auto b = block_of(p, c0, w);
      std::vector<float> d(b.size(), 123.0f);  // overwritten, not accumulated
      cross_entropy_backward(tokens, w, b.data(), c0, valid, p.targets.data(), lse.data(), scale, d.data());
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t c = 0; c < w; ++c)
          grad[static_cast<std::size_t>(t * padded + c0 + c)] = d[static_cast<std::size_t>(t * w + c)];
    }
    EXPECT_TRUE(RelClose(grad, ref.dlogits)) << tokens << "x" << valid << "/" << padded;
  }
}

TEST_P(CrossEntropy, BackwardInPlaceEqualsOutOfPlace) {
  std::mt19937 rng(56);
  const auto p = make_problem(rng, 33, 250, 256, 0.3);
  std::vector<float> lse;
  blockwise(p, {256}, lse);
  std::vector<float> out(p.logits.size());
  cross_entropy_backward(33, 256, p.logits.data(), 0, 250, p.targets.data(), lse.data(), 0.1f, out.data());
  auto inplace = p.logits;
  cross_entropy_backward(33, 256, inplace.data(), 0, 250, p.targets.data(), lse.data(), 0.1f, inplace.data());
  EXPECT_TRUE(testing::bitwise_equal(inplace, out));
}

TEST_P(CrossEntropy, AllMaskedBatchGivesZeroLossCountAndGradients) {
  std::mt19937 rng(57);
  auto p = make_problem(rng, 17, 33, 40, 1.0);
  p.logits[5] = kInf;  // even non-finite logits of masked tokens must not leak into gradients
  p.logits[50] = kNaN;
  std::vector<float> lse;
  const LossSum ls = blockwise(p, {20, 20}, lse);
  EXPECT_EQ(ls.count, 0);
  EXPECT_EQ(ls.sum, 0.0);
  std::vector<float> lse_fwd(17);
  const LossSum fwd = cross_entropy_forward(17, 40, p.logits.data(), p.targets.data(), lse_fwd.data());
  EXPECT_EQ(fwd.count, 0);
  EXPECT_EQ(fwd.sum, 0.0);
  auto d = p.logits;  // in place, as the caller would
  cross_entropy_backward(17, 40, d.data(), 0, 33, p.targets.data(), lse.data(), 0.0f, d.data());
  for (float v : d) ASSERT_EQ(v, 0.0f);
}

TEST(CrossEntropyReference, ReferenceGradientMatchesFiniteDifferences) {
  std::mt19937 rng(58);
  const auto p = make_problem(rng, 3, 7, 7, 0.3);
  const auto x = testing::to_double(p.logits);
  const auto ref = reference(p, x, 1.0);
  ASSERT_GT(ref.count, 0);
  auto mean_loss = [&](const std::vector<double>& v) {
    const auto r = reference(p, v, 1.0);
    return r.loss_sum / double(r.count);
  };
  const auto ref_scaled = reference(p, x, 1.0 / double(ref.count));
  EXPECT_LE(testing::rel_l2(ref_scaled.dlogits, testing::numeric_gradient(mean_loss, x)), 1e-7);
}

TEST_P(CrossEntropy, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(59);
  const auto p = make_problem(rng, 1000, 250, 256, 0.2);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<float> lse;
    const LossSum ls = blockwise(p, {100, 156}, lse);
    std::vector<float> lse_fwd(1000);
    const auto unpadded = block_of(p, 0, 250);
    const LossSum fwd = cross_entropy_forward(1000, 250, unpadded.data(), p.targets.data(), lse_fwd.data());
    auto d = p.logits;
    cross_entropy_backward(1000, 256, d.data(), 0, 250, p.targets.data(), lse.data(), 1e-3f, d.data());
    d.insert(d.end(), lse.begin(), lse.end());
    d.insert(d.end(), lse_fwd.begin(), lse_fwd.end());
    d.push_back(float(ls.sum));
    d.push_back(float(fwd.sum));
    return d;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(CrossEntropyChecks, RejectsTargetsOutsideTheVocabulary) {
  std::vector<float> logits(8, 0.0f), lse(2), rm(2, -kInf), rs(2, 0.0f), tl(2);
  for (const std::vector<std::int32_t>& bad : {std::vector<std::int32_t>{0, 4}, {0, -1}, {3, 0}}) {
    // vocabulary of 3 real columns padded to 4: target 3 is padding, 4 is outside, -1 invalid
    EXPECT_THROW(softmax_stats_update(2, 4, logits.data(), 0, 3, bad.data(), rm.data(), rs.data(), tl.data()), Error);
    EXPECT_THROW(cross_entropy_backward(2, 4, logits.data(), 0, 3, bad.data(), lse.data(), 1.0f, logits.data()), Error);
  }
  const std::vector<std::int32_t> out_of_range = {0, 4};
  EXPECT_THROW(cross_entropy_forward(2, 4, logits.data(), out_of_range.data(), lse.data()), Error);
  // Zero tokens: nothing to do, no loss.
  const LossSum none = cross_entropy_forward(0, 4, nullptr, nullptr, nullptr);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.sum, 0.0);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(CrossEntropy);

}  // namespace
}  // namespace origami::kernels
