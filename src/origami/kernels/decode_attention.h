// Attention of one decode step: every sequence of the batch has one new query (at its own
// position) against its KV cache, all in one call, each sequence's keys and values read once for
// all the query heads that share them (grouped-query attention).
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

struct DecodeAttentionShape {
  std::int64_t batch = 1;     // B sequences, one query each
  std::int64_t slots = 0;     // cache slots per sequence: the stride between sequences' K/V
  std::int64_t heads = 1;     // H query heads
  std::int64_t kv_heads = 1;  // Hkv; H % Hkv == 0; query head i uses kv head i / (H/Hkv)
  std::int64_t head_dim = 1;  // d
};

// Most query heads per kv head (their running softmax state is on the kernel's stack).
inline constexpr std::int64_t kDecodeAttentionMaxRep = 64;

// Layouts (row-major): q, out [B, H, d]; k, v [B, slots, Hkv, d] (the KV cache's own layout).
// Sequence b searches its first visible[b] <= slots slots; slot j is attended iff
// slot_pos[j] <= q_pos[b] (slot_pos [slots], the same for every sequence, as the cache keeps
// them). out = softmax(scale * q k^T) v over the attended slots; zeros where none is.
// Results are bitwise independent of the thread count.
void decode_attention(const DecodeAttentionShape& s, const float* q, const float* k, const float* v,
                      const std::int64_t* q_pos, const std::int64_t* slot_pos,
                      const std::int64_t* visible, float scale, float* out);

// The same over a bf16 KV cache (inference's --precision bf16): keys and values widened to fp32
// (exact) as they are read; scores, softmax statistics and out in fp32, in the same order as
// above, so out is bitwise what decode_attention gives for the bf16 values of k and v.
void decode_attention_bf16(const DecodeAttentionShape& s, const float* q, const bf16* k,
                           const bf16* v, const std::int64_t* q_pos, const std::int64_t* slot_pos,
                           const std::int64_t* visible, float scale, float* out);

}  // namespace origami::kernels
