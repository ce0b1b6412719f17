// The mixture-of-experts MLP (Mixtral-style; docs/models.md "Mixture of experts") as a
// forward/backward pair over a block's local rows, like the gated MLP of blocks.h:
//
//   logits = n Wr^T (fp32)          p = softmax(logits) over the E experts
//   chosen = the k experts of largest logit, ties to the LOWER expert index, in that order
//   weight_j = p_chosen_j / sum_i p_chosen_i           (renormalised over the k chosen)
//   y += sum_j weight_j * expert_chosen_j(n)           (SwiGLU experts, the dense MLP's math)
//
// Capacity (capacity_factor > 0): expert e takes at most C = ceil(factor * rows * k / E)
// assignments, in priority order: every token's first choice (token order) before any
// second choice, and so on (GShard's order). A dropped assignment contributes zero and keeps
// its place in the renormalisation. 0: dropless.
//
// Load balance (Switch / Mixtral): balance = E * sum_e f_e * P_e over the block's rows, with
// f_e = (assignments choosing e, drops included) / rows and P_e = mean of p_e. The caller
// scales it into the loss (coefficient, layers, micro-batches) and passes d(loss)/d(balance)
// to the backward.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/model/blocks.h"
#include "origami/model/weights.h"

namespace origami {

struct MoeDims {
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  std::int64_t ffn = 0;      // each expert's width
  std::int64_t experts = 0;  // E
  std::int64_t top_k = 0;    // k
  double capacity_factor = 0;
};

struct MoeWeights {
  const float* router;               // [E, h]
  std::vector<MlpWeights> experts;   // E
};
struct MoeGrads {
  float* router;
  std::vector<MlpGrads> experts;
};
// A layer's router and experts as the blocks read them (whole, or a rank's shards of them).
MoeWeights moe_weights(const LayerTensors& layer);
MoeGrads moe_grads(LayerTensors& layer);

// Which expert each token's slots go to, and the packed order of the kept assignments: expert
// by expert, each expert's in priority order. Recomputed from the logits wherever needed.
struct MoeRouting {
  std::vector<std::int32_t> expert;  // [rows, k] chosen experts, by descending logit
  std::vector<float> weight;         // [rows, k] renormalised routing weights
  std::vector<std::uint8_t> kept;    // [rows, k] 0: dropped by the capacity
  std::vector<std::int64_t> offset;  // [E + 1] first packed row of each expert
  std::vector<std::int64_t> slot;    // [kept] the slot (token * k + j) of each packed row
  std::vector<std::int64_t> chosen;  // [E] assignments choosing each expert (drops included)
  std::int64_t dropped = 0;          // assignments dropped by the capacity
  std::int64_t capacity = 0;         // C; 0: dropless
};

// What a forward measured: the balance term above, and the routing's counts.
struct MoeStats {
  double balance = 0;
  std::int64_t dropped = 0;
  std::vector<std::int64_t> tokens_per_expert;  // kept assignments per expert
};

// The expert load of a step (docs/moe.md "Load metrics"): kept assignments per expert summed
// over the layers and micro-batches (and, sharded, over every rank's tokens), and the
// assignments a capacity dropped. Kept + dropped = tokens x k x layers.
struct MoeLoad {
  std::vector<std::int64_t> tokens_per_expert;  // [E]; empty for a dense model
  std::int64_t dropped = 0;
  // Adds a layer's or micro-batch's counts (the first sets the number of experts).
  void add(const std::vector<std::int64_t>& tokens, std::int64_t dropped_assignments);
  void add(const MoeLoad& other) { add(other.tokens_per_expert, other.dropped); }
  // max_e tokens_e / mean_e tokens_e: 1 when balanced, E when one expert takes every
  // assignment; 0 when there are none.
  double imbalance() const;
};

// The routing of `rows` tokens from their router logits [rows, E] (probabilities are formed
// in double from them).
MoeRouting route_tokens(const MoeDims& dims, const float* logits);

// The pieces a sharded schedule (TSP's expert ring) composes the same layer from.
// The rows of n that expert e's packed assignments read, [ne, h] (Workspace).
Tensor moe_gather_rows(const MoeDims& dims, const MoeRouting& routing, std::int64_t expert,
                       const float* n, MemoryTracker& tracker);
// Per expert, the sum over the block's rows of p_e (the numerator of P_e).
std::vector<double> moe_probability_sums(const MoeDims& dims, const float* logits);
// balance = E * sum_e (chosen_e / rows) * (probability_sums_e / rows), over `rows` tokens.
double moe_balance(const std::vector<std::int64_t>& chosen,
                   const std::vector<double>& probability_sums, std::int64_t rows);
// d(loss)/d(p_te), the same for every token: balance_grad * E * chosen_e / rows^2.
std::vector<double> moe_balance_probability_grad(const std::vector<std::int64_t>& chosen,
                                                 std::int64_t rows, double balance_grad);
// The router's backward: from dweight (d loss / d routing weight of each slot, [rows, k]) and
// probability_grad (moe_balance_probability_grad) through the renormalisation and the softmax
// to the logits; dn += dlogits Wr (dn null: skipped, another rank adds it), grad_router +=
// dlogits^T n.
void moe_router_backward(const MoeDims& dims, const MoeRouting& routing, const float* logits,
                         const std::vector<double>& dweight,
                         const std::vector<double>& probability_grad, const float* n,
                         const float* router, MemoryTracker& tracker, float* dn,
                         float* grad_router);

// y[rows, h] += the layer's output; saved receives the logits and every kept assignment's
// gate/up pre-activations (Activations), stats (optional) the balance and counts over these
// rows. Returns the routing (a strategy reduces its counts over the job's micro-batch).
MoeRouting moe_block_forward(const MoeDims& dims, const float* n, const MoeWeights& w,
                       MemoryTracker& tracker, MlpSaved& saved, float* y, MoeStats* stats);
// What the backward needs when the forward did not keep it (recompute mlp/full), as Workspace.
void moe_block_recompute(const MoeDims& dims, const float* n, const MoeWeights& w,
                         MemoryTracker& tracker, MlpSaved& saved);
// The experts' part of the backward: dn[rows, h] += each kept assignment's input gradient,
// the experts' gradients += ...; returns d loss / d routing weight of every slot [rows, k]
// (dy . the expert's output; 0 for a dropped one), which moe_router_backward takes. With
// sharded experts (a tp rank's f/T columns) each of these is the rank's partial sum.
std::vector<double> moe_experts_backward(const MoeDims& dims, const float* n, const MoeWeights& w,
                                         const MlpSaved& saved, const MoeRouting& routing,
                                         const float* dy, MemoryTracker& tracker, float* dn,
                                         const std::vector<MlpGrads>& g);
// The whole backward over the block's rows (experts, then router): dn[rows, h] += ...,
// grads += ...; balance_grad = d(loss)/d(balance) of this block's rows.
void moe_block_backward(const MoeDims& dims, const float* n, const MoeWeights& w,
                        const MlpSaved& saved, const float* dy, double balance_grad,
                        MemoryTracker& tracker, float* dn, const MoeGrads& g);

}  // namespace origami
