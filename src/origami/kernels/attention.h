// Causal flash attention on explicit global positions, with grouped-query attention and
// optional per-token document ids (packed documents: no attention across a boundary). Tiled with an online softmax: never materialises a [queries x keys] matrix beyond one tile.
#pragma once

#include <cstdint>

namespace origami::kernels {

struct AttentionShape {
  std::int64_t batch = 1;     // B sequences
  std::int64_t q_len = 0;     // query rows per sequence
  std::int64_t kv_len = 0;    // key/value rows per sequence
  std::int64_t heads = 1;     // H query heads
  std::int64_t kv_heads = 1;  // Hkv key/value heads; H % Hkv == 0; query head i uses kv head i / (H/Hkv)
  std::int64_t head_dim = 1;  // d
};

// Layouts (row-major):
//   q, out, dq:  [B, q_len, H, d]      k, v, dk, dv: [B, kv_len, Hkv, d]
//   lse:         [B, H, q_len]         natural-log log-sum-exp of the scaled scores
//   q_pos [q_len], k_pos [kv_len]: global positions, the same for every sequence of the batch.
// Key j is visible to query i iff k_pos[j] <= q_pos[i]. A query that sees no key gets a zero
// output row and lse = -infinity (and contributes nothing in backward). Scores are scaled by
// `scale` (usually 1/sqrt(d)). Positions need not be sorted or contiguous; lengths need not be
// multiples of the tile.
void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, float scale,
                       float* out, float* lse);

// Document ids of packed rows: q_doc [B, q_len], k_doc [B, kv_len], per sequence (unlike the
// positions). With them, key j is visible to query i of sequence b iff
// k_doc[b, j] == q_doc[b, i] and k_pos[j] <= q_pos[i]. Both null: one document (the calls
// above). A query block and key tile whose document ranges do not meet are skipped, forward
// and backward, so packed short documents cost their own causal work, not the row's; ids that
// never decrease along the positions (as packing gives) make those ranges tight.
struct AttentionDocs {
  const std::int32_t* q_doc = nullptr;
  const std::int32_t* k_doc = nullptr;
  bool any() const { return q_doc != nullptr || k_doc != nullptr; }
};
void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos,
                       const AttentionDocs& docs, float scale, float* out, float* lse);

// Gradients given `out` and `lse` from the forward (or, when the keys were split into several
// calls, the merged final out and lse: the backward of each key subset is then exact).
// dq, dk, dv are accumulated (+=).
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const std::int64_t* q_pos, const std::int64_t* k_pos, float scale,
                        const float* out, const float* lse, const float* dout, float* dq,
                        float* dk, float* dv);
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const std::int64_t* q_pos, const std::int64_t* k_pos,
                        const AttentionDocs& docs, float scale, const float* out,
                        const float* lse, const float* dout, float* dq, float* dk, float* dv);

// Merges a second partial attention result (over a disjoint key set) into the first, exactly,
// by log-sum-exp: out_a, lse_a <- merge(out_a, lse_a, out_b, lse_b). Same layouts as above.
void attention_merge(std::int64_t batch, std::int64_t q_len, std::int64_t heads,
                     std::int64_t head_dim, float* out_a, float* lse_a, const float* out_b,
                     const float* lse_b);

// FLOPs of the forward counted as the products actually needed under the causal mask:
// 4 * d * H * (visible query-key pairs) per sequence, times B. Backward is 2.5x that
// (dV, dP, dQ, dK plus recomputing the scores).
double attention_forward_flops(const AttentionShape& s, const std::int64_t* q_pos,
                               const std::int64_t* k_pos);
// The same with document masking: visible pairs counted per sequence.
double attention_forward_flops(const AttentionShape& s, const std::int64_t* q_pos,
                               const std::int64_t* k_pos, const AttentionDocs& docs);

}  // namespace origami::kernels
