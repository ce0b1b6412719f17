// The single-device Llama model: embedding; L x [RMSNorm, attention with RoPE, residual,
// RMSNorm, gated MLP, residual]; final RMSNorm; untied LM head; mean cross-entropy over the
// unmasked labels. It is the strategy "single": the shared model driver (driver.h: the layer
// loop, what each layer saves, the recompute policy) over the single-device blocks
// (single_ops.h).
#pragma once

#include <cstdint>
#include <vector>

#include "origami/model/blocks.h"
#include "origami/model/driver.h"
#include "origami/model/single_ops.h"
#include "origami/model/config.h"
#include "origami/model/weights.h"

namespace origami {

// B sequences of S tokens; labels[b, s] is the target of position s (kIgnoreLabel = masked).
// Packed documents (--document-masking; data/dataset.h Batch) add, both or neither:
//   documents[b, s]  the document of token s within row b: 0 at s = 0, then the same or one
//                    more at each token; attention never crosses from one to another
//   positions[b, s]  the token's position within its document, RoPE's angle: one more than
//                    the previous token's within a document, 0 where a document begins
//                    (the first token of a row may continue a document at any position >= 0)
// Neither: each row is one unbroken causal sequence at positions 0 .. S-1.
struct TokenBatch {
  std::int64_t batch = 1;
  std::int64_t seq = 0;
  const std::int32_t* input_ids = nullptr;  // [batch, seq]
  const std::int32_t* labels = nullptr;     // [batch, seq]
  const std::int32_t* documents = nullptr;  // [batch, seq]
  const std::int64_t* positions = nullptr;  // [batch, seq]
};

// ConfigError unless documents and positions (when given) follow the rules above and every
// position is below max_positions; names the row and token.
void check_documents(const TokenBatch& batch, std::int64_t max_positions);

// Sum of the per-token losses over unmasked labels and their count; mean() = sum/count (0 when
// every label is masked).
struct LossResult {
  double sum = 0;
  std::int64_t count = 0;
  // Mixture of experts: this micro-batch's load-balancing loss (SingleOps::router_aux_loss;
  // the step adds aux_weight x this to its mean) and its expert load over the layers (kept
  // assignments per expert, and the ones the capacity dropped: SingleOps::moe_load).
  double aux = 0;
  MoeLoad moe;
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
};

// Counts the unmasked labels of a batch (the loss's denominator, known before any compute).
std::int64_t count_unmasked(const TokenBatch& batch);

class LlamaModel {
 public:
  // Allocates parameters (initialised from `seed`) and zeroed gradients on `tracker`.
  LlamaModel(const ModelConfig& config, MemoryTracker& tracker, std::uint64_t seed,
             Recompute recompute = Recompute::None);

  const ModelConfig& config() const { return config_; }
  ModelTensors& params() { return params_; }
  ModelTensors& grads() { return grads_; }
  MemoryTracker& tracker() { return tracker_; }

  // Forward and backward of one micro-batch. Gradients accumulate into grads(); the gradient of
  // the loss sum is multiplied by grad_scale (1 / unmasked labels of the whole step, so that
  // micro-batches add up to the gradient of the step's mean loss). A mixture-of-experts
  // model's auxiliary loss enters the step's loss as aux_weight x LossResult::aux, and its
  // gradient likewise: 1 / micro-batches (docs/models.md "Mixture of experts").
  LossResult forward_backward(const TokenBatch& batch, double grad_scale,
                              double aux_weight = 1.0);
  // Forward only (evaluation); nothing is saved.
  LossResult forward(const TokenBatch& batch);

 private:
  LossResult run(const TokenBatch& batch, double grad_scale, double aux_weight, bool backward);
  void check_batch(const TokenBatch& batch) const;

  ModelConfig config_;
  MemoryTracker& tracker_;
  ModelTensors params_;
  ModelTensors grads_;
  SingleOps ops_;
  ModelDriver driver_;
};

// Model FLOPs of one forward+backward over B sequences of S tokens (the formula in
// docs/flops.md): 6 * (matrix parameters touched per token) * tokens + attention
// 4*d*H*pairs forward (x3.5 with backward), pairs = S(S+1)/2 per sequence and layer.
double training_flops(const ModelConfig& config, std::int64_t batch, std::int64_t seq);

}  // namespace origami
