// The driver's pipeline-stage entry points (issue 20, step 2's driver part): a model cut into
// stages and run in 1F1B order, several micro-batches in flight, gives bit for bit the loss
// and every gradient of the whole-model run of the same micro-batches, under every recompute
// policy, and keeps one set of saved activations per micro-batch in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "origami/model/driver.h"
#include "origami/model/llama.h"
#include "origami/model/single_ops.h"
#include "origami/parallel/pipeline_schedule.h"
#include "sanitizers.h"
#include "tiny_model.h"

namespace origami {
namespace {

struct StagedMicroBatch {
  std::vector<std::int32_t> ids, labels;
};

std::vector<StagedMicroBatch> staged_micro_batches(int m, std::int64_t tokens, std::int64_t vocab) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<std::int32_t> tok(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<StagedMicroBatch> out(static_cast<std::size_t>(m));
  for (StagedMicroBatch& b : out)
    for (std::int64_t i = 0; i < tokens; ++i) {
      b.ids.push_back(tok(rng));
      b.labels.push_back(i % 7 == 3 ? kernels::kIgnoreLabel : tok(rng));  // some masked
    }
  return out;
}

// The 1F1B order of p stages over m micro-batches (parallel/pipeline_schedule.h), serialised
// on one device: a stage's next step runs once its input (the previous stage's forward, the
// next stage's backward) has. Returns (stage, micro-batch, is_backward) in execution order.
struct StagedOp {
  int stage, micro;
  bool backward;
};
std::vector<StagedOp> one_f_one_b_serialised(int p, int m) {
  std::vector<std::vector<parallel::PipelineStep>> per_stage;
  for (int s = 0; s < p; ++s) per_stage.push_back(parallel::pipeline_order(p, 1, s, m));
  std::vector<std::vector<bool>> fdone(static_cast<std::size_t>(p),
                                       std::vector<bool>(static_cast<std::size_t>(m))),
      bdone = fdone;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<StagedOp> order;
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < p; ++s) {
      auto& at = next[static_cast<std::size_t>(s)];
      if (at == per_stage[static_cast<std::size_t>(s)].size()) continue;
      const parallel::PipelineStep step = per_stage[static_cast<std::size_t>(s)][at];
      const std::size_t us = static_cast<std::size_t>(s), mb = static_cast<std::size_t>(step.micro);
      const bool ready = step.backward ? (s == p - 1 ? fdone[us][mb] : bdone[us + 1][mb])
                                       : (s == 0 || fdone[us - 1][mb]);
      if (!ready) continue;
      (step.backward ? bdone : fdone)[us][mb] = true;
      order.push_back({s, step.micro, step.backward});
      ++at;
      progressed = true;
    }
  }
  EXPECT_EQ(order.size(), static_cast<std::size_t>(2 * p * m));  // no stage stalled
  return order;
}

void expect_stages_equal_whole_run(const std::vector<std::int64_t>& split, int m,
                                   Recompute recompute) {
  const ModelConfig c = [&] {
    ModelConfig t = model_test::tiny();
    t.num_hidden_layers = 0;
    for (const std::int64_t n : split) t.num_hidden_layers += n;
    return t;
  }();
  const std::int64_t B = 2, S = 12;
  const std::vector<StagedMicroBatch> micro = staged_micro_batches(m, B * S, c.vocab_size);
  std::int64_t unmasked = 0;
  for (const StagedMicroBatch& b : micro)
    for (const std::int32_t l : b.labels) unmasked += l != kernels::kIgnoreLabel;
  const double scale = 1.0 / static_cast<double>(unmasked);

  MemoryTracker whole_tracker("whole"), staged_tracker("staged");
  LlamaModel whole(c, whole_tracker, 5, recompute);
  double whole_loss = 0;
  for (const StagedMicroBatch& b : micro)
    whole_loss += whole.forward_backward({B, S, b.ids.data(), b.labels.data()}, scale).sum;

  LlamaModel staged(c, staged_tracker, 5, recompute);  // same seed: the same parameters
  SingleOps ops(c, staged.params(), staged.grads(), staged_tracker);
  ModelDriver driver(c, staged.params(), staged.grads(), ops, staged_tracker, recompute);
  std::vector<std::int64_t> first{0};
  for (const std::int64_t n : split) first.push_back(first.back() + n);
  const int p = static_cast<int>(split.size());
  // The boundary "messages": stage s's output (forward) and input gradient (backward) of
  // each micro-batch, kept until the neighbour stage takes them.
  std::vector<std::vector<Tensor>> acts(static_cast<std::size_t>(p + 1)),
      grads(static_cast<std::size_t>(p + 1));
  for (auto& v : acts) v.resize(static_cast<std::size_t>(m));
  for (auto& v : grads) v.resize(static_cast<std::size_t>(m));
  double staged_loss = 0;
  std::size_t most_in_flight = 0;
  for (const StagedOp& op : one_f_one_b_serialised(p, m)) {
    const std::size_t s = static_cast<std::size_t>(op.stage), mb = static_cast<std::size_t>(op.micro);
    ops.set_batch(B, S, micro[mb].ids.data(), micro[mb].labels.data());
    // One micro-batch id per (stage, micro-batch): the stages share this one driver here.
    const int id = op.stage * m + op.micro;
    if (!op.backward) {
      Tensor x = std::move(acts[s][mb]);
      staged_loss += driver.stage_forward(id, first[s], first[s + 1], x).sum;
      EXPECT_EQ(x.defined(), op.stage + 1 < p);
      acts[s + 1][mb] = std::move(x);
    } else {
      Tensor dx = std::move(grads[s + 1][mb]);
      driver.stage_backward(id, scale, dx);
      grads[s][mb] = std::move(dx);
    }
    most_in_flight = std::max(most_in_flight, driver.in_flight());
  }
  EXPECT_EQ(driver.in_flight(), 0u);
  // Several micro-batches in flight at once (here all stages share one driver).
  if (m > 1 && p > 1) {
    EXPECT_GT(most_in_flight, 1u);
  }

  EXPECT_EQ(staged_loss, whole_loss);
  const std::vector<NamedTensor> want = named_tensors(whole.grads());
  const std::vector<NamedTensor> got = named_tensors(staged.grads());
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Tensor& a = *got[i].tensor;
    const Tensor& b = *want[i].tensor;
    ASSERT_EQ(a.numel(), b.numel());
    EXPECT_EQ(std::memcmp(a.f32(), b.f32(), static_cast<std::size_t>(a.bytes())), 0)
        << want[i].name << " differs: relative " << model_test::relative_difference(a, b);
  }
}

TEST(DriverStages, StagesInOneFOneBOrderEqualTheWholeRunBitForBit) {
  // Uneven splits with m < p, m = p and m > p; stages of one layer; every recompute policy
  // (under the sanitizers: m < p and m > p with full recompute only).
  expect_stages_equal_whole_run({1, 1, 2, 1}, 2, Recompute::None);
  expect_stages_equal_whole_run({1, 2, 1}, 4, Recompute::Full);
#ifndef ORIGAMI_TESTS_SANITIZED
  expect_stages_equal_whole_run({1, 2}, 1, Recompute::None);
  expect_stages_equal_whole_run({2, 1, 1}, 3, Recompute::None);
  expect_stages_equal_whole_run({2, 1}, 4, Recompute::Mlp);
#endif
}

TEST(DriverStages, RefusesAStageOutOfRangeOrAMicroBatchTwiceInFlight) {
  const ModelConfig c = model_test::tiny();  // 2 layers
  MemoryTracker tracker("stages");
  LlamaModel model(c, tracker, 5);
  SingleOps ops(c, model.params(), model.grads(), tracker);
  ModelDriver driver(c, model.params(), model.grads(), ops, tracker, Recompute::None);
  const std::vector<StagedMicroBatch> micro = staged_micro_batches(1, 8, c.vocab_size);
  ops.set_batch(1, 8, micro[0].ids.data(), micro[0].labels.data());
  Tensor x;
  EXPECT_THROW(driver.stage_forward(0, 0, 3, x), Error);
  EXPECT_THROW(driver.stage_forward(0, 1, 1, x), Error);
  EXPECT_THROW(driver.stage_forward(0, 1, 2, x), Error);  // no input rows given
  EXPECT_EQ(driver.in_flight(), 0u);  // nothing left by the refusals
  Tensor y;
  driver.stage_forward(7, 0, 1, y);
  Tensor z;
  EXPECT_THROW(driver.stage_forward(7, 0, 1, z), Error);
  Tensor dx;
  EXPECT_THROW(driver.stage_backward(8, 1.0, dx), Error);
  EXPECT_THROW(driver.stage_backward(7, 1.0, dx), Error);  // no output gradient given
  EXPECT_EQ(driver.in_flight(), 1u);
}

}  // namespace
}  // namespace origami
