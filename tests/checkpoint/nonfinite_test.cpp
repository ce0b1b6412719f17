// The non-finite guard (issue 14, item 3): a step whose loss or gradient norm is not finite
// stops before the optimizer touches the weights, and a checkpoint holding a non-finite value
// is never written as complete.
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ckpt_util.h"
#include "origami/model/llama.h"
#include "origami/parallel/shard_spec.h"

namespace origami::ckpt_test {
namespace {

using ::testing::HasSubstr;

std::vector<float> flatten(ModelTensors& t) {
  std::vector<float> v;
  for (NamedTensor& n : named_tensors(t))
    for (float x : n.tensor->span()) v.push_back(x);
  return v;
}

TEST(NonFinite, StepStopsBeforeTheOptimizer) {
  MemoryTracker tracker("nonfinite");
  LlamaModel model(tiny_model(), tracker, 7, Recompute::None);
  AdamW opt(tiny_model(), tracker, kernels::AdamWHyper{});
  // One NaN in the final norm: every logit, the loss and every gradient become NaN.
  named_tensors(model.params()).back().tensor->span()[0] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> before = flatten(model.params());
  std::vector<std::int32_t> ids(24, 5), labels(24, 6);
  const std::vector<TokenBatch> micro{{1, 24, ids.data(), labels.data()}};
  EXPECT_THROW(train_step(model, opt, micro, 1e-2f, 1.0), Error);
  EXPECT_EQ(opt.steps_taken(), 0);
  const std::vector<float> after = flatten(model.params());
  ASSERT_EQ(before.size(), after.size());
  std::int64_t changed = 0;
  for (std::size_t i = 0; i < before.size(); ++i)
    changed += !(before[i] == after[i] || (std::isnan(before[i]) && std::isnan(after[i])));
  EXPECT_EQ(changed, 0) << "the optimizer ran on a non-finite step";
}

TEST(NonFinite, SaveRefusesANonFiniteModel) {
  const std::string root = fresh_dir("nonfinite");
  MemoryTracker tracker("nonfinite");
  const auto specs = parallel::make_shard_specs(tiny_model(), 1, 0);
  ModelTensors params =
      parallel::allocate_sharded(tiny_model(), specs, tracker, MemCategory::Parameters);
  AdamW opt(params, tracker, kernels::AdamWHyper{});
  named_tensors(opt.second_moment())[3].tensor->span()[2] = std::numeric_limits<float>::infinity();
  try {
    ckpt::save(nullptr, root, 1, tiny_model(), {&specs, &params, &opt}, nlohmann::json::object());
    FAIL() << "a non-finite model was saved";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("non-finite"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("optimizer.exp_avg_sq."));
  }
  EXPECT_FALSE(ckpt::is_complete(ckpt::checkpoint_dir(root, 1)));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace origami::ckpt_test
