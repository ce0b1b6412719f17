// TSP (tsp_ops.h) against the single-device model through the shared parity harness: loss,
// every gathered gradient and the gradient norm (per tensor <= 1e-5), and for a subset five
// AdamW steps with clipping (losses and parameters <= 1e-4). Covered: D = 1, 2, 3, 4, 8;
// zigzag and contiguous; MHA and grouped-query attention; B = 1, 2, 4; gradient accumulation;
// every recompute policy; dp=2 x tsp=2; vocabularies not divisible by D (97 at 2, 4, 8; 100
// at 3, 8).
#include <gtest/gtest.h>

#include <algorithm>

#include "origami/core/error.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/registry.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::ParallelConfig;
using parallel::TokenLayoutKind;

ModelConfig mha() {  // 4 heads
  return make_model(100, 64, 96, 4, 4);
}
ModelConfig gqa2() {  // 4 heads over 2 kv heads, vocabulary 97
  return make_model(97, 64, 96, 4, 2);
}
ModelConfig gqa4() {  // 8 heads over 4 kv heads, vocabulary 97
  return make_model(97, 64, 96, 8, 4);
}
ModelConfig six() {  // 6 heads over 3 kv heads (degree 3), vocabulary 100
  return make_model(100, 48, 96, 6, 3);
}
ModelConfig eight() {  // 8 heads / 8 kv heads (degree 8), vocabulary 100
  return make_model(100, 64, 96, 8, 8);
}

ParallelConfig tsp(int dp, int d, TokenLayoutKind layout = TokenLayoutKind::Zigzag) {
  return make_tsp_plan(dp, d, layout);
}
constexpr auto kContig = TokenLayoutKind::Contiguous;

std::vector<Case> matrix() {
  std::vector<Case> v;
  auto add = [&](std::string name, ModelConfig m, ParallelConfig p, Recompute r = Recompute::None,
                 std::int64_t B = 2, int micro = 1, std::int64_t seq = 24) {
    Case c;
    c.name = std::move(name);
    c.model = m;
    c.plan = p;
    c.recompute = r;
    c.batch = B;
    c.micro = micro;
    c.seq = seq;
    v.push_back(c);
  };
  add("tsp1", mha(), tsp(1, 1));
  add("tsp2_zigzag", mha(), tsp(1, 2));
  add("tsp2_contiguous", mha(), tsp(1, 2, kContig));
  add("tsp2_gqa", gqa2(), tsp(1, 2));
  add("tsp3_zigzag", six(), tsp(1, 3));
  add("tsp3_contiguous", six(), tsp(1, 3, kContig));
  add("tsp4_zigzag", mha(), tsp(1, 4));
  add("tsp4_contiguous_gqa", gqa4(), tsp(1, 4, kContig));
  add("tsp4_gqa_B4", gqa4(), tsp(1, 4), Recompute::None, 4);
  add("tsp4_B1", mha(), tsp(1, 4), Recompute::None, 1);
  add("tsp8_zigzag", eight(), tsp(1, 8), Recompute::None, 2, 1, 32);
  add("tsp8_contiguous", eight(), tsp(1, 8, kContig), Recompute::None, 1, 1, 32);
  add("tsp2_mlp", gqa2(), tsp(1, 2), Recompute::Mlp);
  add("tsp4_full", mha(), tsp(1, 4), Recompute::Full);
  add("tsp3_mlp_contiguous", six(), tsp(1, 3, kContig), Recompute::Mlp);
  add("tsp2_full_accum", gqa2(), tsp(1, 2), Recompute::Full, 2, 2);
  add("dp2xtsp2", mha(), tsp(2, 2));
  add("dp2xtsp2_gqa_full", gqa2(), tsp(2, 2, kContig), Recompute::Full, 4);
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

class TspParity : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

TEST_P(TspParity, LossAndEveryGradientEqualOneDevice) {
  const Case& c = GetParam();
  const Data d = make_data(c, 1);
  expect_equal(c, run_threads(c, d), run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Matrix, TspParity, ::testing::ValuesIn(matrix()), case_name);

std::vector<Case> step_cases() {
  std::vector<Case> v;
  for (Case c : matrix()) {
    static const std::vector<std::string> chosen = {"tsp2_zigzag", "tsp3_contiguous", "tsp4_gqa_B4",
                                                    "tsp2_full_accum", "dp2xtsp2"};
    if (std::find(chosen.begin(), chosen.end(), c.name) == chosen.end()) continue;
    c.steps = 5;
    c.max_grad_norm = 1.0;
    v.push_back(c);
  }
  return v;
}

class TspParitySteps : public TspParity {};

TEST_P(TspParitySteps, FiveAdamWStepsMatchOneDevice) {
  const Case& c = GetParam();
  const Data d = make_data(c, c.steps + 1);
  expect_equal(c, run_threads(c, d), run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Matrix, TspParitySteps, ::testing::ValuesIn(step_cases()), case_name);

// Bad input refused up front, the constraint named.
TEST(TspPlan, RefusesDegreesThatDoNotDivide) {
  const ParallelConfig p4 = tsp(1, 4);
  try {
    parallel::validate_plan(p4, gqa2(), 24, 2, 4);  // 2 kv heads < 4
    FAIL() << "kv heads 2 < degree 4 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tsp"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parallel::validate_plan(tsp(1, 3), mha(), 24, 2, 3), ConfigError);  // heads 4
  EXPECT_THROW(parallel::validate_plan(tsp(1, 4), mha(), 20, 2, 4), ConfigError);  // 20 % 8
  EXPECT_NO_THROW(parallel::validate_plan(tsp(1, 4), mha(), 24, 2, 4));
  const ParallelConfig words =
      parallel::make_parallel_config("tsp", 1, "dp=2,tsp=2", false, TokenLayoutKind::Zigzag);
  EXPECT_TRUE(words.is_tsp());
  EXPECT_EQ(words.dp, 2);
  EXPECT_EQ(words.tsp, 2);
  EXPECT_THROW(
      parallel::make_parallel_config("tsp", 1, "tp=2,tsp=2", false, TokenLayoutKind::Zigzag),
      ConfigError);
}

}  // namespace
}  // namespace origami::parity
