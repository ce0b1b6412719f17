// Inference in bf16 (InferenceEngine::use_bf16, generate --precision bf16) against fp32 on the
// same model, D = 1 and 2 (TSP over threads), on both paths of the prefill's bf16 products
// (kernels/gemm.h linear_forward): this CPU's (oneDNN's bf16 matmul where it has bf16 dot
// products, the activations rounded to bf16) and the widening path forced (as on a CPU without
// them). Widening: the prefill's logits bitwise equal to an fp32 engine holding the
// bf16-rounded weights (the shards' rows widened exactly, fp32 GEMMs; the attention on the
// gathered fp32 K/V; the head's bf16 product bitwise the fp32 one). Native: within a stated
// tolerance of that engine (the activations' rounding). Decode within a stated tolerance of
// both (the cache's bf16 rounding), the greedy tokens of the true fp32 model, and the
// tracker's weight and KV-cache bytes exactly half.
#include <bit>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "infer_harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/core/bf16.h"
#include "origami/kernels/gemm.h"
#include "origami/model/weights.h"

namespace origami {
namespace {

using infer_test::gather_logits;
using infer_test::gqa_model;
using infer_test::kSeed;
using infer_test::random_prompts;
using infer_test::rel_error;

// The engine's fp32 weights replaced by their bf16 values (what use_bf16 keeps, in fp32).
void round_weights_to_bf16(ModelTensors& p) {
  const auto round = [](Tensor& t) {
    for (float& x : t.span()) x = round_to_bf16(x);
  };
  round(p.embed);
  for (LayerTensors& L : p.layers)
    for (Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) round(*t);
  if (!p.tied) round(p.lm_head);
}

// (D, the widening path forced)
class InferBf16 : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override { kernels::force_gemm_bf16_conversion(std::get<1>(GetParam())); }
  void TearDown() override { kernels::force_gemm_bf16_conversion(false); }
};

// A bf16 weight is within 2^-9 relative of the fp32 one; the logits of this 2-layer model
// (h 64, initializer range 0.15) move by that times a small growth. The cache's rounding (K and
// V, 2^-9 each) is what separates bf16 decode from the fp32 engine on the rounded weights.
constexpr double kBf16VsFp32LogitTol = 2e-2;         // ||bf16 - fp32|| / ||fp32|| per step
constexpr double kBf16VsRoundedFp32LogitTol = 1e-2;  // decode, against the rounded weights
// The native prefill rounds every product's activations to bf16 (2^-8 = 3.9e-3 relative each,
// random in sign): against the fp32 engine on the rounded weights the logits of these two
// layers move by a small multiple of that (measured 6.5e-3 at D = 1 and 2 on Zen 4's
// avx512_core_bf16; its decode steps, reading the cache that prefill wrote, 8.2e-3, within
// kBf16VsRoundedFp32LogitTol; against fp32 1.43e-2, within kBf16VsFp32LogitTol).
constexpr double kNativePrefillVsRoundedTol = 1e-2;

TEST_P(InferBf16, LogitsFollowFp32AndGreedyTokensAreFp32s) {
  const int D = std::get<0>(GetParam());
  const bool native = kernels::gemm_bf16_native();
  const ModelConfig c = gqa_model();
  const std::vector<int> lengths{5, 11, 8};
  const auto prompts = random_prompts(c, lengths);
  const auto forced = random_prompts(c, {6, 6, 6}, 99);
  const std::int64_t T = 6;
  double worst_fp32 = 0, worst_rounded = 0, prefill_rounded = 0;
  bool prefill_bitwise = true;
  std::vector<std::vector<std::int32_t>> greedy16, greedy32;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    MemoryTracker t16("bf16"), t32("fp32"), tr("rounded");
    infer::InferenceEngine e16(c, world, t16), e32(c, world, t32), er(c, world, tr);
    for (infer::InferenceEngine* e : {&e16, &e32, &er}) e->initialize(kSeed);
    e16.use_bf16();
    round_weights_to_bf16(er.params());
    std::vector<float> l16 = gather_logits(e16, e16.prefill(prompts, T));
    std::vector<float> l32 = gather_logits(e32, e32.prefill(prompts, T));
    std::vector<float> lr = gather_logits(er, er.prefill(prompts, T));
    double w32 = 0, wr = 0, pr = 0;
    bool bitwise = l16.size() == lr.size();
    for (std::size_t i = 0; bitwise && i < l16.size(); ++i)
      bitwise = std::bit_cast<std::uint32_t>(l16[i]) == std::bit_cast<std::uint32_t>(lr[i]);
    const std::int64_t V = c.vocab_size;
    for (std::int64_t t = 0;; ++t) {
      for (std::size_t b = 0; b < prompts.size(); ++b) {
        const std::int64_t at = static_cast<std::int64_t>(b) * V;
        w32 = std::max(w32, rel_error(l16.data() + at, l32.data() + at, V));
        const double e = rel_error(l16.data() + at, lr.data() + at, V);
        double& worst = t == 0 ? pr : wr;
        worst = std::max(worst, e);
      }
      if (t == T) break;
      std::vector<std::int32_t> tok;
      for (const auto& f : forced) tok.push_back(f[static_cast<std::size_t>(t)]);
      l16 = gather_logits(e16, e16.decode(tok));
      l32 = gather_logits(e32, e32.decode(tok));
      lr = gather_logits(er, er.decode(tok));
    }
    const infer::SamplingOptions greedy{.temperature = 0};
    const auto g16 = infer_test::generate(e16, infer_test::generation_prompts(), 8, greedy);
    const auto g32 = infer_test::generate(e32, infer_test::generation_prompts(), 8, greedy);
    if (world.rank() == 0) {
      worst_fp32 = w32;
      worst_rounded = wr;
      prefill_rounded = pr;
      prefill_bitwise = bitwise;
      greedy16 = g16;
      greedy32 = g32;
    }
  });
  if (native) {
    EXPECT_LE(prefill_rounded, kNativePrefillVsRoundedTol);
    EXPECT_GT(prefill_rounded, 0.0);  // the activations were rounded
  } else {
    EXPECT_TRUE(prefill_bitwise) << "prefill logits differ from the fp32 engine on bf16 weights";
  }
  EXPECT_LE(worst_rounded, kBf16VsRoundedFp32LogitTol);
  EXPECT_LE(worst_fp32, kBf16VsFp32LogitTol);
  EXPECT_GT(worst_fp32, 0.0);  // the weights did change
  EXPECT_EQ(greedy16, greedy32);
  std::cout << "D=" << D << (native ? " native" : " widening") << ": worst bf16 vs fp32 "
            << worst_fp32 << ", prefill vs fp32 on bf16 weights " << prefill_rounded
            << ", decode " << worst_rounded << "\n";
}

TEST_P(InferBf16, WeightAndKvCacheBytesAreHalfOfFp32s) {
  const int D = std::get<0>(GetParam());
  const ModelConfig c = gqa_model();
  const auto prompts = random_prompts(c, {5, 11, 8});
  std::vector<std::int64_t> got(6);
  comm::run_ranks(D, [&](comm::Communicator& world) {
    MemoryTracker t16("bf16"), t32("fp32");
    infer::InferenceEngine e16(c, world, t16), e32(c, world, t32);
    e16.initialize(kSeed);
    e32.initialize(kSeed);
    std::int64_t norms = 0;  // stay fp32
    for (const LayerTensors& L : e32.params().layers)
      norms += L.input_norm.bytes() + L.post_norm.bytes();
    norms += e32.params().final_norm.bytes();
    e16.use_bf16();
    e16.prefill(prompts, 4);
    e32.prefill(prompts, 4);
    e16.decode({1, 2, 3});
    e32.decode({1, 2, 3});
    if (world.rank() == D - 1) {
      got = {t16.current(MemCategory::Parameters) - norms,
             t32.current(MemCategory::Parameters) - norms,
             t16.current(MemCategory::KvCache),
             t32.current(MemCategory::KvCache),
             e16.cache()->bytes(),
             e32.cache()->bytes()};
    }
  });
  EXPECT_GT(got[1], 0);
  EXPECT_EQ(2 * got[0], got[1]) << "matrices";
  EXPECT_GT(got[3], 0);
  EXPECT_EQ(2 * got[2], got[3]) << "KV cache";
  EXPECT_EQ(2 * got[4], got[5]) << "KvCache::bytes";
}

INSTANTIATE_TEST_SUITE_P(Ranks, InferBf16,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
                           return "D" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_widening_forced" : "_this_cpu");
                         });

}  // namespace
}  // namespace origami
