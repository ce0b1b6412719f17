// The decode step as issue 15 wants it: nothing allocated after the first step, the weight bytes
// a step reads (what `origami generate` divides by the step time), and a batch too large for the
// skinny kernel (oneDNN's GEMM) decoding each sequence as it decodes alone (the skinny kernel).
#include <gtest/gtest.h>

#include <mutex>

#include "infer_harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/kernels/gemv.h"

namespace origami::infer_test {
namespace {

class DecodeStep : public ::testing::TestWithParam<int> {};

// After the first step, a step's peak is what is already held: no tensor is made and dropped.
TEST_P(DecodeStep, AllocatesNothingAfterItsFirstStep) {
  const int D = GetParam();
  const ModelConfig c = gqa_model();
  for (int B : {3, static_cast<int>(kernels::kSkinnyMaxRows) + 1}) {
    std::vector<int> lengths;
    for (int b = 0; b < B; ++b) lengths.push_back(2 + b % 5);
    const auto prompts = random_prompts(c, lengths);
    comm::run_ranks(D, [&](comm::Communicator& world) {
      infer::InferenceEngine e(c, world, world.tracker());
      e.initialize(kSeed);
      const infer::SamplingOptions greedy;
      const Tensor* logits = &e.prefill(prompts, 6);
      std::vector<std::int32_t> tok =
          infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 0);
      logits = &e.decode(tok);
      MemoryTracker& t = world.tracker();
      const std::int64_t held = t.current_total();
      t.reset_peaks();
      for (int step = 1; step < 5; ++step) {
        tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, step);
        logits = &e.decode(tok);
      }
      EXPECT_EQ(t.current_total(), held) << "B=" << B << " rank " << world.rank();
      EXPECT_EQ(t.peak_total(), held) << "B=" << B << " rank " << world.rank();
    });
  }
}

// Every weight shard once, of the embedding only the batch's rows; over the ranks, the model's
// parameters but the embedding table (the vocabulary's padding rows of the LM head included).
TEST_P(DecodeStep, WeightBytesAreEveryShardOnceAndTheBatchsEmbeddingRows) {
  const int D = GetParam();
  const ModelConfig c = gqa_model();
  const auto prompts = random_prompts(c, {3, 5});
  std::mutex m;
  std::int64_t total = 0;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker());
    e.prefill(prompts, 2);
    const std::int64_t mine = e.step_weight_bytes();
    std::lock_guard lock(m);
    total += mine;
  });
  const std::int64_t h = c.hidden_size, V = c.vocab_size;
  const std::int64_t padded = (V + D - 1) / D * D;
  EXPECT_EQ(total, 4 * (c.num_parameters() - V * h + (padded - V) * h + 2 * h));
}

INSTANTIATE_TEST_SUITE_P(Ranks, DecodeStep, ::testing::Values(1, 2));

// A batch of kSkinnyMaxRows + 1 sequences goes through oneDNN's GEMM; each sequence alone through
// the skinny kernel: the same greedy tokens and logits within 1e-5 (both fp32, summed in
// different orders).
TEST(DecodeStepBatch, GemmBatchDecodesAsEachSequenceAlone) {
  const ModelConfig c = gqa_model();
  const int B = static_cast<int>(kernels::kSkinnyMaxRows) + 1;
  std::vector<int> lengths;
  for (int b = 0; b < B; ++b) lengths.push_back(3 + (b * 7) % 11);
  const auto prompts = random_prompts(c, lengths, 21);
  const infer::SamplingOptions greedy;
  comm::run_ranks(1, [&](comm::Communicator& world) {
    infer::InferenceEngine batch(c, world, world.tracker());
    batch.initialize(kSeed);
    const auto tokens = generate(batch, prompts, 5, greedy);
    for (int b = 0; b < B; b += 5) {
      infer::InferenceEngine one(c, world, world.tracker());
      one.initialize(kSeed);
      EXPECT_EQ(generate(one, {prompts[static_cast<std::size_t>(b)]}, 5, greedy)[0],
                tokens[static_cast<std::size_t>(b)])
          << "sequence " << b;
    }
    // Teacher-forced logits of the last step, batch against alone.
    const std::int64_t Vr = batch.vocab().rows;
    batch.prefill(prompts, 3);
    std::vector<std::int32_t> step(static_cast<std::size_t>(B));
    for (int b = 0; b < B; ++b) step[static_cast<std::size_t>(b)] = (b * 13) % 97;
    const Tensor& all = batch.decode(step);
    for (int b = 0; b < B; b += 4) {
      infer::InferenceEngine one(c, world, world.tracker());
      one.initialize(kSeed);
      one.prefill({prompts[static_cast<std::size_t>(b)]}, 3);
      const Tensor& alone = one.decode({step[static_cast<std::size_t>(b)]});
      EXPECT_LE(rel_error(all.f32() + b * Vr, alone.f32(), Vr), 1e-5) << "sequence " << b;
    }
  });
}

}  // namespace
}  // namespace origami::infer_test
