// Properties of the single-device model that the PyTorch oracle does not cover: gradient
// accumulation, fully masked batches, memory accounting, determinism, bad batches.
#include "origami/model/llama.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/kernels/cross_entropy.h"
#include "origami/kernels/threads.h"
#include "origami/train/trainer.h"
#include "tiny_model.h"

namespace origami {
namespace {

using model_test::relative_difference;
using model_test::tiny;

struct Tokens {
  std::vector<std::int32_t> ids, labels;
  TokenBatch batch(std::int64_t B, std::int64_t S, std::int64_t first_sequence = 0) const {
    return {B, S, ids.data() + first_sequence * S, labels.data() + first_sequence * S};
  }
};

Tokens random_tokens(std::int64_t n, std::int64_t vocab, unsigned seed, int mask_every = 5) {
  std::mt19937 gen(seed);
  Tokens t;
  for (std::int64_t i = 0; i < n; ++i) {
    t.ids.push_back(static_cast<std::int32_t>(gen() % vocab));
    t.labels.push_back(i % mask_every == 0 ? kernels::kIgnoreLabel
                                           : static_cast<std::int32_t>(gen() % vocab));
  }
  return t;
}

TEST(LlamaModel, GradientAccumulationOverMicroBatchesEqualsOneBatch) {
  const ModelConfig c = tiny();
  const std::int64_t S = 24;
  const Tokens t = random_tokens(3 * S, c.vocab_size, 1);
  MemoryTracker ta, tb;
  LlamaModel whole(c, ta, 5), parts(c, tb, 5);
  const std::int64_t count = count_unmasked(t.batch(3, S));
  const LossResult lw = whole.forward_backward(t.batch(3, S), 1.0 / double(count));
  double sum = 0;
  for (int b = 0; b < 3; ++b) sum += parts.forward_backward(t.batch(1, S, b), 1.0 / double(count)).sum;
  EXPECT_NEAR(sum, lw.sum, 1e-9 * std::abs(lw.sum) + 1e-4);
  auto gw = named_tensors(whole.grads());
  auto gp = named_tensors(parts.grads());
  for (std::size_t i = 0; i < gw.size(); ++i)
    EXPECT_LE(relative_difference(*gp[i].tensor, *gw[i].tensor), 1e-5) << gw[i].name;
}

TEST(LlamaModel, FullyMaskedBatchGivesZeroLossAndZeroGradientsNotNaN) {
  const ModelConfig c = tiny();
  Tokens t = random_tokens(16, c.vocab_size, 2);
  for (auto& l : t.labels) l = kernels::kIgnoreLabel;
  MemoryTracker tracker;
  LlamaModel model(c, tracker, 1);
  AdamW opt(c, tracker, {});
  const StepStats s = train_step(model, opt, {t.batch(2, 8)}, 1e-3f, 1.0);
  EXPECT_EQ(s.loss, 0.0);
  EXPECT_EQ(s.grad_norm, 0.0);
  for (const NamedTensor& p : named_tensors(model.params()))
    for (float x : p.tensor->span()) ASSERT_TRUE(std::isfinite(x)) << p.name;
}

TEST(LlamaModel, ForwardOnlyLossEqualsTrainingLossAndSavesNothing) {
  const ModelConfig c = tiny();
  const Tokens t = random_tokens(40, c.vocab_size, 3);
  MemoryTracker tracker;
  LlamaModel model(c, tracker, 9);
  const LossResult eval = model.forward(t.batch(2, 20));
  EXPECT_EQ(tracker.current(MemCategory::Activations), 0);
  const LossResult train = model.forward_backward(t.batch(2, 20), 0.01);
  EXPECT_EQ(eval.sum, train.sum);
  EXPECT_EQ(eval.count, train.count);
}

TEST(LlamaModel, MemoryAccountingMatchesTheModelAndReleasesActivations) {
  const ModelConfig c = tiny();
  MemoryTracker tracker;
  LlamaModel model(c, tracker, 1);
  AdamW opt(c, tracker, {});
  const std::int64_t param_bytes = c.num_parameters() * 4;
  EXPECT_EQ(tracker.current(MemCategory::Parameters), param_bytes);
  EXPECT_EQ(tracker.current(MemCategory::Gradients), param_bytes);
  EXPECT_EQ(tracker.current(MemCategory::OptimizerState), 2 * param_bytes);
  const std::int64_t B = 2, S = 32, rows = B * S;
  const Tokens t = random_tokens(rows, c.vocab_size, 4);
  train_step(model, opt, {t.batch(B, S)}, 1e-3f, 0.0);
  EXPECT_EQ(tracker.current(MemCategory::Activations), 0);
  EXPECT_EQ(tracker.current(MemCategory::Logits), 0);
  // Per layer: x_in, x_mid (h each), q, out (H*d), k, v (Hkv*d), a, u (f), lse (H per row),
  // two rstd; plus the final norm's rstd.
  const std::int64_t h = c.hidden_size, kv = c.kv_dim(), f = c.intermediate_size;
  const std::int64_t per_layer = rows * (2 * h + 2 * h + 2 * kv + 2 * f + c.num_attention_heads + 2);
  EXPECT_EQ(tracker.peak(MemCategory::Activations), 4 * (c.num_hidden_layers * per_layer + rows));
  EXPECT_EQ(tracker.peak(MemCategory::Logits), 4 * rows * c.vocab_size);
}

TEST(LlamaModel, TrainingIsBitwiseDeterministic) {
  const ModelConfig c = tiny();
  const Tokens t = random_tokens(64, c.vocab_size, 5);
  std::vector<double> losses[2];
  std::vector<float> final_params[2];
  for (int run = 0; run < 2; ++run) {
    MemoryTracker tracker;
    LlamaModel model(c, tracker, 3);
    AdamW opt(c, tracker, {});
    for (int s = 0; s < 3; ++s)
      losses[run].push_back(train_step(model, opt, {t.batch(2, 32)}, 1e-3f, 1.0).loss);
    for (const NamedTensor& p : named_tensors(model.params()))
      final_params[run].insert(final_params[run].end(), p.tensor->span().begin(), p.tensor->span().end());
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(final_params[0], final_params[1]);
  EXPECT_LT(losses[0][2], losses[0][0]);  // and it learns
}

TEST(LlamaModel, TwoKernelThreadsAgreeWithOne) {
  const ModelConfig c = tiny();
  const Tokens t = random_tokens(96, c.vocab_size, 6);
  MemoryTracker ta, tb;
  LlamaModel one(c, ta, 2), two(c, tb, 2);
  kernels::set_thread_count(1);
  one.forward_backward(t.batch(3, 32), 0.01);
  kernels::set_thread_count(2);
  two.forward_backward(t.batch(3, 32), 0.01);
  kernels::set_thread_count(1);
  auto g1 = named_tensors(one.grads());
  auto g2 = named_tensors(two.grads());
  for (std::size_t i = 0; i < g1.size(); ++i)
    EXPECT_LE(relative_difference(*g2[i].tensor, *g1[i].tensor), 1e-5) << g1[i].name;
}

TEST(LlamaModel, RefusesBadBatches) {
  const ModelConfig c = tiny();
  MemoryTracker tracker;
  LlamaModel model(c, tracker, 1);
  Tokens t = random_tokens(8, c.vocab_size, 7);
  t.ids[3] = static_cast<std::int32_t>(c.vocab_size);
  EXPECT_THROW(model.forward(t.batch(1, 8)), Error);
  t.ids[3] = -1;
  EXPECT_THROW(model.forward(t.batch(1, 8)), Error);
  t.ids[3] = 0;
  t.labels[2] = 999;
  EXPECT_THROW(model.forward(t.batch(1, 8)), Error);
  const Tokens longer = random_tokens(200, c.vocab_size, 8);
  EXPECT_THROW(model.forward(longer.batch(1, 200)), ConfigError);  // beyond max positions
}

TEST(LearningRate, WarmsUpLinearlyThenDecaysByCosineToTheFloor) {
  EXPECT_FLOAT_EQ(learning_rate(1, 100, 10, 1.0f, 0.1f), 0.1f);
  EXPECT_FLOAT_EQ(learning_rate(10, 100, 10, 1.0f, 0.1f), 1.0f);
  EXPECT_NEAR(learning_rate(55, 100, 10, 1.0f, 0.1f), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(learning_rate(100, 100, 10, 1.0f, 0.1f), 0.1f);
}

}  // namespace
}  // namespace origami
