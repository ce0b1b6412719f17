// The decode step as issue 15 wants it: nothing allocated after the first step, the weight bytes
// a step reads (what `origami generate` divides by the step time), and a batch too large for the
// skinny kernel (oneDNN's GEMM) decoding each sequence as it decodes alone (the skinny kernel).
#include <gtest/gtest.h>

#include <array>
#include <mutex>

#include "infer_harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/kernels/gemv.h"

namespace origami::infer_test {
namespace {

class DecodeStep : public ::testing::TestWithParam<int> {};

// After the first step, a step's peak is what is already held: no tensor is made and dropped.
// (The communicator's all-reduce stages its B*h floats per call, CommBuffers: not the step's.)
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
      std::array<std::int64_t, kNumMemCategories> held{};
      for (int k = 0; k < kNumMemCategories; ++k)
        held[static_cast<std::size_t>(k)] = t.current(static_cast<MemCategory>(k));
      t.reset_peaks();
      for (int step = 1; step < 5; ++step) {
        tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, step);
        logits = &e.decode(tok);
      }
      for (int k = 0; k < kNumMemCategories; ++k) {
        const auto cat = static_cast<MemCategory>(k);
        if (cat == MemCategory::CommBuffers) continue;
        EXPECT_EQ(t.current(cat), held[static_cast<std::size_t>(k)])
            << mem_category_name(cat) << " B=" << B << " rank " << world.rank();
        EXPECT_EQ(t.peak(cat), held[static_cast<std::size_t>(k)])
            << mem_category_name(cat) << " B=" << B << " rank " << world.rank();
      }
    });
  }
}

// Every weight shard once, of the embedding B rows per rank; over the ranks, the model's
// parameters but the embedding table, plus the LM head's padding rows and the norm weights
// every rank holds (and reads) a copy of.
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
  const std::int64_t h = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers, B = 2;
  const std::int64_t padding = parallel::padded_vocab(V, D) - V;
  const std::int64_t norm_copies = (D - 1) * (2 * L + 1);
  EXPECT_EQ(total, 4 * (c.num_parameters() - V * h + padding * h + norm_copies * h + D * B * h));
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
