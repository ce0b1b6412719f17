// The transformer's blocks as explicit forward/backward pairs over local tensors. A block
// receives its (possibly sharded) weights as pointers with their sizes, so the single-device
// model and the tensor-parallel strategies run the same code on different slices.
// What each block saves for backward is the struct beside it: memory is accountable.
#pragma once

#include <cstdint>

#include "origami/core/tensor.h"
#include "origami/kernels/weight_view.h"
#include "origami/model/config.h"

namespace origami {

// RoPE tables for every position the model may see, built once.
struct RopeTables {
  Tensor cos;  // [max_pos, d/2]
  Tensor sin;
};
RopeTables make_rope_tables(std::int64_t max_pos, std::int64_t head_dim, double theta,
                            MemoryTracker& tracker, const RopeScaling& scaling = {});
// The model's tables: every position, its head size, rope_theta and rope_scaling.
RopeTables make_rope_tables(const ModelConfig& config, MemoryTracker& tracker);

// ---------------------------------------------------------------- attention

// Packed documents of a block's rows (TokenBatch): per-token document ids and positions
// within the document, [batch, seq] each. Null: one document per row, RoPE at `pos`.
struct RowDocuments {
  const std::int32_t* ids = nullptr;
  const std::int64_t* positions = nullptr;
};

struct AttentionDims {
  std::int64_t batch = 1, seq = 0;  // local rows = batch * seq
  std::int64_t hidden = 0;          // h (rows of W_O's output)
  std::int64_t heads = 0;           // query heads held by this block (all, or a shard)
  std::int64_t kv_heads = 0;        // kv heads held by this block
  std::int64_t head_dim = 0;
  // With ids: RoPE at documents.positions instead of `pos`, and attention within documents
  // (attention_block_forward/backward; `pos` stays the causal order).
  RowDocuments documents = {};
  // The dtype K and V are held in (training's --precision bf16: core/precision.h): BF16 rounds
  // them to bf16 values right after their projection (and RoPE), on every layout, so that a
  // sequence axis gathers them in bf16, half the bytes, and loses nothing. The backward takes
  // the rounding as the identity.
  DType kv = DType::F32;
  std::int64_t rows() const { return batch * seq; }
};

// fp32, or bf16 in the bf16 inference's prefill (the forward only: backward reads fp32).
struct AttentionWeights {
  kernels::WeightView wq;  // [heads*d, h]
  kernels::WeightView wk;  // [kv_heads*d, h]
  kernels::WeightView wv;  // [kv_heads*d, h]
  kernels::WeightView wo;  // [h, heads*d] (a shard stores its column slice contiguously)
};
struct AttentionGrads {
  float* wq;
  float* wk;
  float* wv;
  float* wo;
};

// Saved for backward (q and k after RoPE).
struct AttentionSaved {
  Tensor q;    // [rows, heads*d]
  Tensor k;    // [rows, kv_heads*d]
  Tensor v;    // [rows, kv_heads*d]
  Tensor out;  // [rows, heads*d]
  Tensor lse;  // [batch, heads, seq]
};

// The pieces every attention variant shares (single device, context parallel, TSP); only the
// way a rank reaches the other tokens' keys differs between them.
// q[rows, heads*d], k, v[rows, kv_heads*d] = n W^T, q and k rotated at `pos`, written into
// caller-provided storage (TSP writes each head group straight into its slot).
void attention_project_into(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                            const std::int64_t* pos, const RopeTables& rope, float* q, float* k,
                            float* v);
// Allocates saved.{q,k,v,out,lse} (activations of the block's rows and heads, lse [B, H, S]).
void allocate_attention_saved(const AttentionDims& dims, MemoryTracker& tracker,
                              AttentionSaved& saved);
// Allocates saved (allocate_attention_saved) and fills q, k, v by attention_project_into.
void attention_project_forward(const AttentionDims& dims, const float* n,
                               const AttentionWeights& w, const std::int64_t* pos,
                               const RopeTables& rope, MemoryTracker& tracker,
                               AttentionSaved& saved);
// grads.wo += dy^T out; returns dout = dy W_O, the gradient of the attention output.
Tensor attention_output_backward(const AttentionDims& dims, const AttentionWeights& w,
                                 const float* saved_out, const float* dy,
                                 MemoryTracker& tracker, const AttentionGrads& g);
// Given dq, dk, dv of the rank's rows (after any reduce-scatter), undoes RoPE on dq and dk in
// place, then grads.{wq,wk,wv} += ... and dn += ...
void attention_project_backward(const AttentionDims& dims, const float* n,
                                const AttentionWeights& w, const std::int64_t* pos,
                                const RopeTables& rope, Tensor& dq, Tensor& dk, const Tensor& dv,
                                float* dn, const AttentionGrads& g);
// The same in two halves, so that a parallel attention can run the query half while its dK/dV
// are still being reduced: (q) undoes RoPE on dq, grads.wq += ..., dn += dq W_Q; (kv) the
// same for dk and dv. Calling q then kv equals attention_project_backward, bit for bit.
void attention_project_backward_q(const AttentionDims& dims, const float* n,
                                  const AttentionWeights& w, const std::int64_t* pos,
                                  const RopeTables& rope, float* dq, float* dn,
                                  const AttentionGrads& g);
void attention_project_backward_kv(const AttentionDims& dims, const float* n,
                                   const AttentionWeights& w, const std::int64_t* pos,
                                   const RopeTables& rope, float* dk, const float* dv, float* dn,
                                   const AttentionGrads& g);

// y[rows, h] += attention(n) @ W_O^T (the output projection accumulates, so head shards sum).
void attention_block_forward(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                             const std::int64_t* positions, const RopeTables& rope,
                             MemoryTracker& tracker, AttentionSaved& saved, float* y);
// dn[rows, h] += ..., grads += ...
void attention_block_backward(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                              const std::int64_t* positions, const RopeTables& rope,
                              const AttentionSaved& saved, const float* dy,
                              MemoryTracker& tracker, float* dn, const AttentionGrads& g);

// ---------------------------------------------------------------- gated MLP

struct MlpDims {
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  std::int64_t ffn = 0;  // columns of W_gate/W_up held by this block
};
// fp32, or bf16 in the bf16 inference's prefill (the forward only: backward reads fp32).
struct MlpWeights {
  kernels::WeightView w_gate;  // [ffn, h]
  kernels::WeightView w_up;    // [ffn, h]
  kernels::WeightView w_down;  // [h, ffn] (a shard stores its column slice contiguously)
};
struct MlpGrads {
  float* w_gate;
  float* w_up;
  float* w_down;
};
// Saved for backward: the gate and up pre-activations (silu(a)*u is recomputed).
struct MlpSaved {
  Tensor a;  // [rows, ffn]; a mixture-of-experts layer: every kept assignment's row (moe.h)
  Tensor u;  // [rows, ffn]
  Tensor router_logits;  // mixture of experts only: [rows, E] (the routing is redone from it)
  // TSP's expert schedule only: the token rows this rank's experts received, [received, h]
  // (a and u are then those rows' pre-activations, each expert's whole width).
  Tensor expert_inputs;
};
// The same rows held elsewhere (TSP writes each MLP shard's into its slot of the layer's
// saved tensors): the forward writes them, the backward reads them in place.
struct MlpSlot {
  float* a;  // [rows, ffn]
  float* u;  // [rows, ffn]
};
struct MlpSavedView {
  const float* a;
  const float* u;
};

// y[rows, h] += (silu(n W_gate^T) * (n W_up^T)) W_down^T
void mlp_block_forward(const MlpDims& dims, const float* n, const MlpWeights& w,
                       MemoryTracker& tracker, MlpSaved& saved, float* y);
void mlp_block_forward(const MlpDims& dims, const float* n, const MlpWeights& w,
                       MemoryTracker& tracker, const MlpSlot& saved, float* y);
// Recomputes the gate/up pre-activations a backward needs when the forward did not keep them
// (recompute policies mlp and full), as Workspace: they live only for this backward.
void mlp_block_recompute(const MlpDims& dims, const float* n, const MlpWeights& w,
                         MemoryTracker& tracker, MlpSaved& saved);
void mlp_block_backward(const MlpDims& dims, const float* n, const MlpWeights& w,
                        const MlpSaved& saved, const float* dy, MemoryTracker& tracker, float* dn,
                        const MlpGrads& g);
void mlp_block_backward(const MlpDims& dims, const float* n, const MlpWeights& w,
                        const MlpSavedView& saved, const float* dy, MemoryTracker& tracker,
                        float* dn, const MlpGrads& g);

}  // namespace origami
