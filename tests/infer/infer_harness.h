// Shared by the inference tests: a grouped-query model with an odd vocabulary, prompts of
// different lengths, the single-device reference (the single-device model's blocks over the
// whole sequence, every position's logits) and a generation loop over the engine.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/infer/engine.h"
#include "origami/infer/sampling.h"
#include "origami/kernels/embedding.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/rmsnorm.h"
#include "origami/model/blocks.h"
#include "origami/model/weights.h"
#include "origami/parallel/layout.h"

namespace origami::infer_test {

constexpr std::uint64_t kSeed = 1234;

// 8 heads / 4 kv heads (GQA), vocabulary 97 (padded at D = 2, 4), 2 layers. With fewer kv
// heads (2, 1) the degrees above them replicate each kv head (D = 2·Hkv, 4·Hkv).
inline ModelConfig gqa_model(std::int64_t kv_heads = 4) {
  ModelConfig c;
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 8;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = 64;
  c.initializer_range = 0.15;  // far from uniform attention: every path carries signal
  return c;
}

inline std::vector<std::vector<std::int32_t>> random_prompts(const ModelConfig& c,
                                                             const std::vector<int>& lengths,
                                                             unsigned seed = 7) {
  std::mt19937 gen(seed);
  std::vector<std::vector<std::int32_t>> p;
  for (int n : lengths) {
    p.emplace_back();
    for (int i = 0; i < n; ++i)
      p.back().push_back(static_cast<std::int32_t>(gen() % static_cast<unsigned>(c.vocab_size)));
  }
  return p;
}

// The single device: every position's logits [S, V] of one sequence.
class Reference {
 public:
  Reference(const ModelConfig& c, std::uint64_t seed)
      : c_(c),
        params_(allocate_model_tensors(c, tracker_, MemCategory::Parameters)),
        rope_(make_rope_tables(c, tracker_)) {
    initialize_parameters(params_, c, seed);
  }
  std::vector<float> logits(const std::vector<std::int32_t>& ids) {
    const auto S = static_cast<std::int64_t>(ids.size());
    const std::int64_t h = c_.hidden_size, V = c_.vocab_size;
    const float eps = static_cast<float>(c_.rms_norm_eps);
    std::vector<float> x(static_cast<std::size_t>(S * h)), n(x.size()), rstd(S);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
    for (std::int64_t i = 0; i < S; ++i) pos[static_cast<std::size_t>(i)] = i;
    kernels::embedding_forward(S, h, ids.data(), params_.embed.f32(), 0, V, x.data());
    for (const LayerTensors& L : params_.layers) {
      kernels::rmsnorm_forward(S, h, x.data(), L.input_norm.f32(), eps, n.data(), rstd.data());
      AttentionSaved as;
      attention_block_forward({.batch = 1,
                               .seq = S,
                               .hidden = h,
                               .heads = c_.num_attention_heads,
                               .kv_heads = c_.num_key_value_heads,
                               .head_dim = c_.head_dim()},
                              n.data(), {L.wq.f32(), L.wk.f32(), L.wv.f32(), L.wo.f32()},
                              pos.data(), rope_, tracker_, as, x.data());
      kernels::rmsnorm_forward(S, h, x.data(), L.post_norm.f32(), eps, n.data(), rstd.data());
      MlpSaved ms;
      mlp_block_forward({.rows = S, .hidden = h, .ffn = c_.intermediate_size}, n.data(),
                        {L.w_gate.f32(), L.w_up.f32(), L.w_down.f32()}, tracker_, ms, x.data());
    }
    kernels::rmsnorm_forward(S, h, x.data(), params_.final_norm.f32(), eps, n.data(), rstd.data());
    std::vector<float> out(static_cast<std::size_t>(S * V));
    kernels::linear_forward(S, h, V, n.data(), params_.head().f32(), out.data());
    return out;
  }

 private:
  ModelConfig c_;
  MemoryTracker tracker_{"reference"};
  ModelTensors params_;
  RopeTables rope_;
};

// Collective: the full [B, V] logits from every rank's [B, Vr] slice.
inline std::vector<float> gather_logits(infer::InferenceEngine& e, const Tensor& local) {
  const infer::VocabShard s = e.vocab();
  const std::int64_t B = local.numel() / s.rows;
  const int D = e.axis().size();
  std::vector<float> all(static_cast<std::size_t>(D * local.numel()));
  e.axis().all_gather(local, all);
  std::vector<float> out;
  for (std::int64_t b = 0; b < B; ++b)
    for (int r = 0; r < D; ++r)
      for (std::int64_t i = 0; i < s.rows; ++i)
        if (r * s.rows + i < s.vocab)
          out.push_back(all[static_cast<std::size_t>((r * B + b) * s.rows + i)]);
  return out;
}

// ||a - b|| / ||b|| over n values.
inline double rel_error(const float* a, const float* b, std::int64_t n) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    den += double{b[i]} * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Prefill, then draw `steps` tokens per sequence; returns them [B][steps].
inline std::vector<std::vector<std::int32_t>> generate(
    infer::InferenceEngine& e, const std::vector<std::vector<std::int32_t>>& prompts,
    std::int64_t steps, const infer::SamplingOptions& o) {
  const Tensor* logits = &e.prefill(prompts, steps);
  std::vector<std::vector<std::int32_t>> out(prompts.size());
  for (std::int64_t t = 0; t < steps; ++t) {
    const std::vector<std::int32_t> tok =
        infer::sample_tokens(e.axis(), logits->f32(), e.batch(), e.vocab(), o, t);
    for (std::size_t b = 0; b < tok.size(); ++b) out[b].push_back(tok[b]);
    if (t + 1 < steps) logits = &e.decode(tok);
  }
  return out;
}

// Teacher forcing: prefill prompts of lengths 5, 11, 8, then decode 6 given tokens each;
// returns the worst relative error of a step's logits [V] against the single device
// (collective over `world`; every rank checks the same gathered logits). `tied`: the model
// with tied embeddings (the head is the embedding's vocabulary block on each rank); `kv_heads`
// gqa_model's; `head_dim` > 0: the model with that explicit head_dim.
inline double teacher_forced_error(comm::Communicator& world, parallel::TokenLayoutKind layout,
                                   bool tied = false, std::int64_t kv_heads = 4,
                                   std::int64_t head_dim = 0) {
  ModelConfig c = gqa_model(kv_heads);
  c.tie_word_embeddings = tied;
  c.explicit_head_dim = head_dim;
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
  double worst = 0;
  infer::InferenceEngine e(c, world, world.tracker(), layout);
  e.initialize(kSeed);
  std::vector<float> got = gather_logits(e, e.prefill(prompts, T));
  for (std::int64_t t = 0;; ++t) {
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      const std::int64_t pos = lengths[b] - 1 + t;  // the position whose next token is scored
      worst = std::max(worst, rel_error(got.data() + static_cast<std::int64_t>(b) * V,
                                        want[b].data() + pos * V, V));
    }
    if (t == T) break;
    std::vector<std::int32_t> tok;
    for (const auto& f : forced) tok.push_back(f[static_cast<std::size_t>(t)]);
    got = gather_logits(e, e.decode(tok));
  }
  return worst;
}

inline std::vector<infer::SamplingOptions> samplers() {
  return {{.temperature = 0},
          {.temperature = 0.9, .seed = 5},
          {.temperature = 0.9, .top_k = 5, .seed = 6},
          {.temperature = 1.2, .top_p = 0.8, .seed = 7},
          {.temperature = 0.7, .top_k = 20, .top_p = 0.9, .seed = 8}};
}
inline std::vector<std::vector<std::int32_t>> generation_prompts() {
  return random_prompts(gqa_model(), {3, 9, 6, 12});
}
constexpr std::int64_t kGenerateSteps = 10;

// Every sampler's tokens [sampler][sequence][step] on `world` (collective).
inline std::vector<std::vector<std::vector<std::int32_t>>> generate_all(
    comm::Communicator& world, parallel::TokenLayoutKind layout, std::int64_t kv_heads = 4) {
  infer::InferenceEngine e(gqa_model(kv_heads), world, world.tracker(), layout);
  e.initialize(kSeed);
  std::vector<std::vector<std::vector<std::int32_t>>> out;
  for (const auto& o : samplers())
    out.push_back(generate(e, generation_prompts(), kGenerateSteps, o));
  return out;
}

}  // namespace origami::infer_test
