#include "origami/infer/engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/core/float_ops.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/decode_attention.h"
#include "origami/kernels/embedding.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/gemv.h"
#include "origami/kernels/rmsnorm.h"
#include "origami/kernels/rope.h"
#include "origami/kernels/swiglu.h"
#include "origami/model/driver.h"
#include "origami/model/weights.h"
#include "origami/model/weights_bf16.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::infer {

namespace {

parallel::ParallelConfig axis_plan(int D, parallel::TokenLayoutKind layout) {
  parallel::ParallelConfig p;
  p.tsp = D;
  p.layout = layout;
  return p;
}

// y = x W^T for the decode step's B rows: the kernel that streams W once for a few rows
// (kernels/gemv.h), oneDNN's GEMM for a batch too large for it. A bf16 W goes through the
// skinny kernel kSkinnyMaxRows rows at a time (exact in fp32 for any batch, so a batch still
// decodes each sequence as it would alone; W is read once per 16 rows).
void step_linear(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                 const Tensor& W, float* y) {
  if (W.dtype() == DType::BF16) {
    const auto* w = static_cast<const bf16*>(W.raw());
    for (std::int64_t r = 0; r < rows; r += kernels::kSkinnyMaxRows)
      kernels::linear_forward_skinny_bf16(std::min(kernels::kSkinnyMaxRows, rows - r), in, out,
                                          x + r * in, w, y + r * out);
  } else if (rows <= kernels::kSkinnyMaxRows) {
    kernels::linear_forward_skinny(rows, in, out, x, W.f32(), y);
  } else {
    kernels::linear_forward(rows, in, out, x, W.f32(), y);
  }
}

}  // namespace

InferenceEngine::InferenceEngine(const ModelConfig& config, comm::Communicator world,
                                 MemoryTracker& tracker, parallel::TokenLayoutKind layout)
    : config_((validate(config), config)),
      tracker_(tracker),
      layout_kind_(layout),
      D_(world.size()) {
  refuse_mixture_of_experts(config_, "inference");
  if (layout == parallel::TokenLayoutKind::Balanced)
    throw ConfigError("--layout balanced balances packed training documents; a prompt is one "
                      "causal sequence: use --layout zigzag or contiguous");
  check_inference_degree(config_, D_);
  groups_ = std::make_unique<parallel::ParallelGroups>(world, axis_plan(D_, layout));
  axis_ = groups_->tokens();
  rank_ = axis_.rank();
  specs_ = parallel::tsp_strategy(config_, *groups_).specs;
  params_ = parallel::allocate_sharded(config_, specs_, tracker, MemCategory::Parameters);
  rope_ = make_rope_tables(config_, tracker);
  vocab_rows_ = parallel::padded_vocab(config_.vocab_size, D_) / D_;
}

InferenceEngine::~InferenceEngine() = default;

void InferenceEngine::initialize(std::uint64_t seed) {
  parallel::initialize_sharded(params_, specs_, config_, seed);
}

void InferenceEngine::use_bf16() {
  narrow_matrices_to_bf16(params_);
  bf16_ = true;
  cache_.reset();  // a cache of an earlier prefill was fp32
  step_ = StepBuffers();
}

VocabShard InferenceEngine::vocab() const {
  return {.first_id = rank_ * vocab_rows_, .rows = vocab_rows_, .vocab = config_.vocab_size};
}

std::int64_t InferenceEngine::padded_length(std::int64_t longest) const {
  if (D_ == 1) return longest;
  const std::int64_t unit =
      layout_kind_ == parallel::TokenLayoutKind::Contiguous ? D_ : 2 * std::int64_t{D_};
  return (longest + unit - 1) / unit * unit;
}

void InferenceEngine::head(const float* x, std::int64_t rows, float* n, float* rstd) {
  const std::int64_t h = config_.hidden_size;
  kernels::rmsnorm_forward(rows, h, x, params_.final_norm.f32(),
                           static_cast<float>(config_.rms_norm_eps), n, rstd);
  if (!logits_.defined() || logits_.shape() != Shape{rows, vocab_rows_}) {
    logits_ = Tensor();
    logits_ = Tensor(tracker_, MemCategory::Logits, {rows, vocab_rows_});
  }
  step_linear(rows, h, vocab_rows_, n, params_.head(), logits_.f32());
}

std::int64_t InferenceEngine::step_weight_bytes() {
  std::int64_t bytes = 0;
  for (const NamedTensor& t : named_tensors(params_))
    // The embedding's B rows are counted below, unless it is also the (tied) head.
    if (t.tensor != &params_.embed || config_.tie_word_embeddings) bytes += t.tensor->bytes();
  return bytes + batch() * config_.hidden_size *
                     static_cast<std::int64_t>(dtype_size(params_.embed.dtype()));
}

void InferenceEngine::allocate_step_buffers() {
  const ModelConfig& c = config_;
  const std::int64_t B = batch(), h = c.hidden_size;
  const std::int64_t qd = c.num_attention_heads / D_ * c.head_dim();
  const std::int64_t kvd = parallel::kv_heads_per_rank(c, D_) * c.head_dim();
  const std::int64_t fl = c.intermediate_size / D_;
  const auto work = [&](Shape shape) {
    return Tensor(tracker_, MemCategory::Workspace, std::move(shape));
  };
  step_.x = work({B, h});
  step_.n = work({B, h});
  step_.rstd = work({B});
  step_.y = work({B, h});
  step_.q = work({B, qd});
  step_.k = work({B, kvd});
  step_.v = work({B, kvd});
  step_.out = work({B, qd});
  step_.visible.assign(static_cast<std::size_t>(B), 0);
  step_.gate = Tensor(tracker_, MemCategory::Activations, {B, fl});
  step_.up = Tensor(tracker_, MemCategory::Activations, {B, fl});
}

const Tensor& InferenceEngine::prefill(const std::vector<std::vector<std::int32_t>>& prompts,
                                       std::int64_t max_new_tokens) {
  const ModelConfig& c = config_;
  if (prompts.empty()) throw ConfigError("no prompt to prefill; give at least one prompt");
  ORIGAMI_CHECK(max_new_tokens >= 0, "max_new_tokens {} must be >= 0", max_new_tokens);
  std::int64_t longest = 0;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    const auto n = static_cast<std::int64_t>(prompts[b].size());
    if (n == 0) throw ConfigError(fmt::format("prompt {} is empty; give at least one token", b));
    if (n + max_new_tokens > c.max_position_embeddings)
      throw ConfigError(
          fmt::format("prompt {} has {} tokens; with {} new tokens that exceeds the model's "
                      "max_position_embeddings {}: shorten the prompt or lower --max-new-tokens",
                      b, n, max_new_tokens, c.max_position_embeddings));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t id = prompts[b][static_cast<std::size_t>(i)];
      if (id < 0 || id >= c.vocab_size)
        throw ConfigError(
            fmt::format("prompt {}: token id {} at position {} is outside the "
                        "vocabulary [0, {})",
                        b, id, i, c.vocab_size));
    }
    longest = std::max(longest, n);
  }
  const std::int64_t S = padded_length(longest);
  if (S > c.max_position_embeddings)
    throw ConfigError(fmt::format(
        "the longest prompt ({} tokens) padded to {} for {} ranks exceeds "
        "max_position_embeddings {}: shorten it, or use --layout contiguous or fewer ranks",
        longest, S, D_, c.max_position_embeddings));
  const auto B = static_cast<std::int64_t>(prompts.size());
  // Above the kv heads each rank keeps its one (replicated) kv head: kv_heads_per_rank.
  const std::int64_t h = c.hidden_size, kvd = parallel::kv_heads_per_rank(c, D_) * c.head_dim();

  // The padded batch (padding id 0, right of each prompt: causality keeps it unseen).
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * S), 0);
  lengths_.clear();
  for (std::int64_t b = 0; b < B; ++b) {
    std::copy(prompts[b].begin(), prompts[b].end(), ids.begin() + b * S);
    lengths_.push_back(static_cast<std::int64_t>(prompts[b].size()));
  }
  prefill_len_ = S;
  const parallel::TokenLayout layout(D_ > 1 ? layout_kind_ : parallel::TokenLayoutKind::Full, S, D_,
                                     rank_);
  parallel::LocalBatch local{
      B, layout.slice(ids.data(), B),
      std::vector<std::int32_t>(
          static_cast<std::size_t>(B) * static_cast<std::size_t>(layout.local_seq()), 0)};
  std::vector<std::int64_t> kv_positions;  // every rank's positions, rank order (as gathered)
  for (int r = 0; r < D_; ++r)
    for (std::int64_t p : layout.positions_of(r)) kv_positions.push_back(p);
  cache_.reset();
  step_ = StepBuffers();
  cache_ = std::make_unique<KvCache>(tracker_, c.num_hidden_layers, B,
                                     std::max(S, longest + max_new_tokens), kvd, kv_positions,
                                     bf16_ ? DType::BF16 : DType::F32);

  parallel::TspOps ops(c, *groups_, layout, params_, no_grads_, tracker_);
  ops.set_batch(&local);
  ops.set_kv_keep([this](std::int64_t l) {
    // A bf16 cache stages one layer in fp32: the previous layer's is narrowed first.
    if (bf16_ && l > 0) cache_->spread_prefill(l - 1);
    return std::pair{cache_->prefill_k(l), cache_->prefill_v(l)};
  });
  // The layer loop is the training forward's: the one driver (model/driver.h), saving nothing.
  // The kept K/V land in each layer's cache storage, spread to its sequences' rows after.
  ModelDriver driver(c, params_, no_grads_, ops, tracker_, Recompute::None);
  Tensor x = driver.forward_stream();
  for (std::int64_t l = bf16_ ? c.num_hidden_layers - 1 : 0; l < c.num_hidden_layers; ++l)
    cache_->spread_prefill(l);
  const std::int64_t Sl = layout.local_seq();
  ops.set_batch(nullptr);
  // Each prompt's last hidden row, broadcast by the rank holding it.
  Tensor last(tracker_, MemCategory::Workspace, {B, h});
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t p = lengths_[static_cast<std::size_t>(b)] - 1;
    const auto at = static_cast<std::int64_t>(
        std::find(kv_positions.begin(), kv_positions.end(), p) - kv_positions.begin());
    const int owner = static_cast<int>(at / Sl);
    if (owner == rank_)
      copy_floats(float_at(last.f32(), b * h), float_at(x.f32(), (b * Sl + at % Sl) * h), h);
    if (D_ > 1) axis_.broadcast(comm::Buffer(float_at(last.f32(), b * h), h, DType::F32), owner);
  }
  x = Tensor();
  Tensor nf(tracker_, MemCategory::Workspace, {B, h});
  Tensor rstd(tracker_, MemCategory::Workspace, {B});
  head(last.f32(), B, nf.f32(), rstd.f32());
  return logits_;
}

// Decode keeps its own layer loop rather than the driver's: its blocks are another schedule
// (weight-stationary tensor parallel, an all-reduce per block, appending to the KV cache) on
// B rows that are one token per sequence, not the layout's stream rows, and a step must
// allocate nothing (step_, sized once); the driver allocates its norms' workspaces per block.
const Tensor& InferenceEngine::decode(const std::vector<std::int32_t>& tokens) {
  const ModelConfig& c = config_;
  ORIGAMI_CHECK(cache_ != nullptr, "decode before prefill");
  const std::int64_t B = batch();
  ORIGAMI_CHECK(static_cast<std::int64_t>(tokens.size()) == B,
                "decode got {} tokens for a batch of {} sequences", tokens.size(), B);
  const std::vector<std::int64_t>& pos = lengths_;  // the new tokens' positions (++ at the end)
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int32_t id = tokens[static_cast<std::size_t>(b)];
    if (id < 0 || id >= c.vocab_size)
      throw ConfigError(fmt::format("sequence {}: token id {} is outside the vocabulary [0, {})", b,
                                    id, c.vocab_size));
    if (pos[static_cast<std::size_t>(b)] >= cache_->capacity())
      throw ConfigError(
          fmt::format("sequence {} reached the {} positions its prefill reserved "
                      "(max_new_tokens)",
                      b, cache_->capacity()));
  }
  const std::int64_t h = c.hidden_size, d = c.head_dim();
  const std::int64_t Hl = c.num_attention_heads / D_, Kl = parallel::kv_heads_per_rank(c, D_);
  const std::int64_t qd = Hl * d, kvd = Kl * d, fl = c.intermediate_size / D_;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  if (!step_.x.defined()) allocate_step_buffers();
  StepBuffers& t = step_;
  // Embedding: the owned vocabulary rows (zeros for the others), summed over the axis.
  embedding_rows_as_floats(B, h, tokens.data(), params_.embed, rank_ * vocab_rows_, vocab_rows_,
                           t.x.f32());
  if (D_ > 1) axis_.all_reduce(t.x, t.x);
  float* x = t.x.f32();
  float* n = t.n.f32();
  float* y = t.y.f32();
  const std::int64_t* slot_pos = cache_->slot_positions().data();
  for (std::int64_t b = 0; b < B; ++b)
    t.visible[static_cast<std::size_t>(b)] =
        cache_->visible_slots(pos[static_cast<std::size_t>(b)]);
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
    // Attention of the owned head group; the B new tokens are one "sequence" of B rows, each
    // rotated at its own position. Each projection reads its weights once for all B rows.
    kernels::rmsnorm_forward(B, h, x, L.input_norm.f32(), eps, n, t.rstd.f32());
    step_linear(B, h, qd, n, L.wq, t.q.f32());
    step_linear(B, h, kvd, n, L.wk, t.k.f32());
    step_linear(B, h, kvd, n, L.wv, t.v.f32());
    kernels::rope_forward(1, B, Hl, d, pos.data(), rope_.cos.f32(), rope_.sin.f32(), t.q.f32());
    kernels::rope_forward(1, B, Kl, d, pos.data(), rope_.cos.f32(), rope_.sin.f32(), t.k.f32());
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t slot = cache_->slot_of(pos[static_cast<std::size_t>(b)]);
      if (bf16_) {
        kernels::convert_to_bf16(kvd, float_at(t.k.f32(), b * kvd),
                                 cache_->k_bf16(l, b) + slot * kvd);
        kernels::convert_to_bf16(kvd, float_at(t.v.f32(), b * kvd),
                                 cache_->v_bf16(l, b) + slot * kvd);
      } else {
        copy_floats(float_at(cache_->k(l, b), slot * kvd), float_at(t.k.f32(), b * kvd), kvd);
        copy_floats(float_at(cache_->v(l, b), slot * kvd), float_at(t.v.f32(), b * kvd), kvd);
      }
    }
    // All B queries in one call, each against its own sequence's slots.
    const kernels::DecodeAttentionShape shape{
        .batch = B, .slots = cache_->capacity(), .heads = Hl, .kv_heads = Kl, .head_dim = d};
    if (bf16_) {
      kernels::decode_attention_bf16(shape, t.q.f32(), cache_->k_bf16(l, 0), cache_->v_bf16(l, 0),
                                     pos.data(), slot_pos, t.visible.data(), scale, t.out.f32());
    } else {
      kernels::decode_attention(shape, t.q.f32(), cache_->k(l, 0), cache_->v(l, 0), pos.data(),
                                slot_pos, t.visible.data(), scale, t.out.f32());
    }
    step_linear(B, qd, h, t.out.f32(), L.wo, y);
    if (D_ > 1) axis_.all_reduce(t.y, t.y);
    add_floats(x, y, B * h);
    // MLP on the owned F slice: SwiGLU written over the gate rows, then W_down.
    kernels::rmsnorm_forward(B, h, x, L.post_norm.f32(), eps, n, t.rstd.f32());
    step_linear(B, h, fl, n, L.w_gate, t.gate.f32());
    step_linear(B, h, fl, n, L.w_up, t.up.f32());
    kernels::swiglu_forward(B * fl, t.gate.f32(), t.up.f32(), t.gate.f32());
    step_linear(B, fl, h, t.gate.f32(), L.w_down, y);
    if (D_ > 1) axis_.all_reduce(t.y, t.y);
    add_floats(x, y, B * h);
  }
  for (std::int64_t& len : lengths_) ++len;
  head(x, B, n, t.rstd.f32());
  return logits_;
}

}  // namespace origami::infer
