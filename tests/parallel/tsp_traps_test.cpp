// The reduction-group traps of TRAPS.md under TSP (tsp_ops.h): a rank whose tokens are all
// masked, the replicated RMSNorm weights counted once in the gradient norm (their gradients
// summed over the axis first), and vocabularies not divisible by D, padded and masked.
#include <gtest/gtest.h>

#include <cmath>

#include "origami/kernels/threads.h"
#include "origami/parallel/tsp_ops.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::TokenLayoutKind;

class TspTraps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

Case tsp_case(std::string name, ModelConfig m, int dp, int d,
              TokenLayoutKind layout = TokenLayoutKind::Zigzag) {
  Case c;
  c.name = std::move(name);
  c.model = m;
  c.plan = make_tsp_plan(dp, d, layout);
  return c;
}

bool all_finite(const Result& r) {
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return false;
  for (const auto& g : r.grads)
    for (float x : g)
      if (!std::isfinite(x)) return false;
  return true;
}

TEST_F(TspTraps, RankWithEveryTokenMaskedGetsTheOthersMean) {
  // Contiguous tsp=4 over 24 positions: rank 0 holds positions 0..5, all masked; it still
  // broadcasts and rings its shards and receives the others' gradient contributions.
  Case c = tsp_case("tsp4_rank0_masked", make_model(100, 64, 96, 4, 4), 1, 4,
                    TokenLayoutKind::Contiguous);
  c.masked_prefix = 6;
  c.steps = 2;
  const Data d = make_data(c, c.steps + 1);
  const Result par = run_threads(c, d);
  EXPECT_TRUE(all_finite(par));
  EXPECT_GT(par.loss, 0.0);
  expect_equal(c, par, run_single(c, d));
  // With dp outside: the first dp x tsp pair of ranks hold only masked labels.
  Case dp =
      tsp_case("dp2xtsp2_masked", make_model(100, 64, 96, 4, 4), 2, 2, TokenLayoutKind::Contiguous);
  dp.masked_prefix = 12;
  const Data dd = make_data(dp, 1);
  const Result pd = run_threads(dp, dd);
  EXPECT_TRUE(all_finite(pd));
  expect_equal(dp, pd, run_single(dp, dd));
}

TEST_F(TspTraps, ReplicatedNormWeightsCountedOnceInTheGradientNorm) {
  Case c = tsp_case("tsp4_norm", make_model(100, 64, 96, 4, 4), 1, 4);
  const Data d = make_data(c, 1);
  const Result par = run_threads(c, d), ref = run_single(c, d);
  EXPECT_LE(relative_difference(par.grad_norm, ref.grad_norm), 1e-6);
  double norm_sq = 0;
  for (std::size_t i = 0; i < ref.names.size(); ++i)
    if (ref.names[i].find("norm") != std::string::npos)
      for (float x : ref.grads[i]) norm_sq += double(x) * x;
  // Counting the replicated norms 4 times would be visible at this tolerance.
  const double wrong = std::sqrt(ref.grad_norm * ref.grad_norm + 3 * norm_sq);
  EXPECT_GT(relative_difference(wrong, ref.grad_norm), 1e-4) << "the test would not see the trap";
  // The specs state it: shards' squares summed over the axis, norms over nothing.
  comm::run_ranks(4, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    const parallel::Strategy s = parallel::tsp_strategy(c.model, groups);
    for (const parallel::ShardSpec& spec : s.specs) {
      if (spec.is_norm) {
        EXPECT_TRUE(spec.norm_sum_axes.empty()) << spec.name;
        EXPECT_EQ(spec.grad_sum_axes, std::vector<std::string>{"tsp"}) << spec.name;
      } else {
        EXPECT_EQ(spec.norm_sum_axes, std::vector<std::string>{"tsp"}) << spec.name;
        EXPECT_TRUE(spec.grad_sum_axes.empty()) << spec.name;  // reduced to the owner in-block
      }
    }
  });
}

TEST_F(TspTraps, VocabularyNotDivisibleByTheDegreeIsPaddedAndMasked) {
  // 97 is prime: padded to 98 at D = 2, 100 at D = 4; 100 padded to 102 at D = 3.
  for (auto [v, dg] : {std::pair{97, 2}, std::pair{97, 4}, std::pair{100, 3}}) {
    const ModelConfig m = dg == 3 ? make_model(v, 48, 96, 6, 3) : make_model(v, 64, 96, 4, 4);
    Case c = tsp_case("tsp_vocab", m, 1, dg);
    c.steps = 2;
    const Data d = make_data(c, c.steps + 1);
    const Result par = run_threads(c, d);
    ASSERT_EQ(par.grads[0].size(), static_cast<std::size_t>(v * m.hidden_size))
        << "gathered embedding without the padding rows";
    expect_equal(c, par, run_single(c, d));
  }
}

// The LM head's vocabulary ring moves each block in chunks of at most kHeadRingChunkFloats
// (tsp_head.cpp). V 33001 at h 64: blocks of 16501 (D = 2: 16384 + 117 rows, the second chunk
// padded past V) and 11001 rows (D = 3: one chunk) -- the chunk boundaries, the padding inside
// the last chunk and the running softmax across chunks all equal the single device.
TEST_F(TspTraps, VocabularyRingInChunksEqualsOneDevice) {
  ASSERT_EQ(parallel::kHeadRingChunkFloats / 64, 16384);
  for (int dg : {2, 3}) {
    const ModelConfig m = dg == 3 ? make_model(33001, 48, 96, 6, 3, 1) : make_model(33001, 64, 96, 4, 4, 1);
    Case c = tsp_case("tsp_vocab_chunks", m, 1, dg);
    c.steps = 2;
    const Data d = make_data(c, c.steps + 1);
    expect_equal(c, run_threads(c, d), run_single(c, d));
  }
}

}  // namespace
}  // namespace origami::parity
