// Inference parity (DESIGN.md §6): the TSP prefill and the weight-stationary decode at D = 1,
// 2, 4 over the threads transport against the single device, with grouped-query attention
// (8 heads / 4 kv heads), an odd vocabulary (97: padded rows at D = 2, 4) and a batch of
// prompts of different lengths. Teacher-forced logits per step <= 1e-5; generated tokens
// identical for greedy and seeded sampling.
#include <gtest/gtest.h>

#include <mutex>

#include <fmt/format.h>

#include "infer_harness.h"
#include "origami/comm/run_ranks.h"

namespace origami::infer_test {
namespace {

using parallel::TokenLayoutKind;

struct ParityCase {
  int degree;
  TokenLayoutKind layout;
};

class InferParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(InferParity, TeacherForcedLogitsMatchTheSingleDevice) {
  const ModelConfig c = gqa_model();
  const std::vector<int> lengths{5, 11, 8};
  const auto prompts = random_prompts(c, lengths);
  const auto forced = random_prompts(c, {6, 6, 6}, 99);  // the tokens fed to decode
  const std::int64_t T = 6, V = c.vocab_size;
  Reference ref(c, kSeed);
  std::vector<std::vector<float>> want;  // per sequence, every position's logits
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    std::vector<std::int32_t> all = prompts[b];
    all.insert(all.end(), forced[b].begin(), forced[b].end());
    want.push_back(ref.logits(all));
  }
  std::mutex m;
  double worst = 0;
  comm::run_ranks(GetParam().degree, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker(), GetParam().layout);
    e.initialize(kSeed);
    std::vector<float> got = gather_logits(e, e.prefill(prompts, T));
    for (std::int64_t t = 0; t <= T; ++t) {
      for (std::size_t b = 0; b < prompts.size(); ++b) {
        const std::int64_t pos = lengths[b] - 1 + t;  // the position whose next token is scored
        const double err = rel_error(got.data() + static_cast<std::int64_t>(b) * V,
                                     want[b].data() + pos * V, V);
        EXPECT_LE(err, 1e-5) << "rank " << world.rank() << " sequence " << b << " step " << t;
        std::lock_guard lock(m);
        worst = std::max(worst, err);
      }
      if (t == T) break;
      std::vector<std::int32_t> tok;
      for (const auto& f : forced) tok.push_back(f[static_cast<std::size_t>(t)]);
      got = gather_logits(e, e.decode(tok));
    }
  });
  std::printf("worst relative error of a step's logits: %.3g\n", worst);
}

TEST_P(InferParity, GeneratedTokensAreTheSingleDevicesForEverySampler) {
  const ModelConfig c = gqa_model();
  const auto prompts = random_prompts(c, {3, 9, 6, 12});
  const std::int64_t steps = 10;
  std::vector<infer::SamplingOptions> samplers{
      {.temperature = 0},
      {.temperature = 0.9, .seed = 5},
      {.temperature = 0.9, .top_k = 5, .seed = 6},
      {.temperature = 1.2, .top_p = 0.8, .seed = 7},
      {.temperature = 0.7, .top_k = 20, .top_p = 0.9, .seed = 8}};
  // The single device (D = 1 is the engine on one rank: the same code).
  std::vector<std::vector<std::vector<std::int32_t>>> want;
  comm::run_ranks(1, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker());
    e.initialize(kSeed);
    for (const auto& o : samplers) want.push_back(generate(e, prompts, steps, o));
  });
  // Greedy against the reference too: re-running the whole sequence every token.
  {
    Reference ref(c, kSeed);
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      std::vector<std::int32_t> seq = prompts[b];
      for (std::int64_t t = 0; t < steps; ++t) {
        const std::vector<float> l = ref.logits(seq);
        const float* last = l.data() + (static_cast<std::int64_t>(seq.size()) - 1) * c.vocab_size;
        const auto best = static_cast<std::int32_t>(std::max_element(last, last + c.vocab_size) - last);
        EXPECT_EQ(want[0][b][static_cast<std::size_t>(t)], best) << "sequence " << b << " step " << t;
        seq.push_back(best);
      }
    }
  }
  std::mutex m;
  comm::run_ranks(GetParam().degree, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker(), GetParam().layout);
    e.initialize(kSeed);
    for (std::size_t s = 0; s < samplers.size(); ++s) {
      const auto got = generate(e, prompts, steps, samplers[s]);
      std::lock_guard lock(m);
      EXPECT_EQ(got, want[s]) << "sampler " << s << " rank " << world.rank();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Degrees, InferParity,
    ::testing::Values(ParityCase{1, TokenLayoutKind::Zigzag}, ParityCase{2, TokenLayoutKind::Zigzag},
                      ParityCase{4, TokenLayoutKind::Zigzag},
                      ParityCase{2, TokenLayoutKind::Contiguous},
                      ParityCase{4, TokenLayoutKind::Contiguous}),
    [](const auto& info) {
      return fmt::format("D{}_{}", info.param.degree,
                         parallel::token_layout_name(info.param.layout));
    });

// Bad input: a clear ConfigError naming what to change.
TEST(InferBadInput, RefusesEmptyTooLongAndOutOfVocabularyPrompts) {
  const ModelConfig c = gqa_model();
  comm::run_ranks(1, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker());
    e.initialize(kSeed);
    auto message = [&](const std::vector<std::vector<std::int32_t>>& p, std::int64_t n) {
      try {
        e.prefill(p, n);
      } catch (const ConfigError& err) {
        return std::string(err.what());
      }
      return std::string("no error");
    };
    EXPECT_NE(message({{}}, 4).find("empty"), std::string::npos);
    EXPECT_NE(message({std::vector<std::int32_t>(60, 1)}, 8).find("max_position_embeddings"),
              std::string::npos);
    EXPECT_NE(message({{1, 97}}, 1).find("outside the vocabulary"), std::string::npos);
    EXPECT_NE(message({{-1}}, 1).find("outside the vocabulary"), std::string::npos);
    e.prefill({{1, 2}}, 1);
    e.decode({3});
    EXPECT_THROW(e.decode({4}), ConfigError);  // beyond the reserved max_new_tokens
  });
}

TEST(InferBadInput, RefusesADegreeThatDoesNotSplitTheHeads) {
  ModelConfig c = gqa_model();
  c.num_key_value_heads = 2;
  EXPECT_THROW(comm::run_ranks(4, [&](comm::Communicator& world) {
                 infer::InferenceEngine e(c, world, world.tracker());
               }),
               ConfigError);
}

}  // namespace
}  // namespace origami::infer_test
