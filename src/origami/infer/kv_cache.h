// The KV cache of one rank (docs/design.md §6.1). Rank j owns head group j (Kv/D kv heads of width
// d; with D > Kv the one kv head j / (D/Kv), whose D/Kv replicas each keep a copy): for every
// layer and sequence it keeps those heads' keys (after RoPE) and values, [B, capacity, width].
// Slots [0, S) hold the prompt padded to S in the order the TSP prefill gathered it (every rank's
// layout positions, rank order; SequenceAxis::keep_k); the token decoded at position p goes to the
// slot holding p (a padded slot when p < S) or to slot p (p >= S). Each slot's global position is
// kept (slot_positions), so the attention kernel masks on positions: a query at position p sees
// exactly the slots holding 0..p, never a padded slot (padded positions are > p until a decoded
// token overwrites them).
//
// In bf16 (generate --precision bf16) the keys and values are stored rounded to bf16; the
// prefill writes each layer's gathered K/V into one fp32 staging buffer [B, S, width]
// (MemCategory::Workspace, one layer's worth), which spread_prefill narrows into the layer's
// slots before the next layer's gather reuses it.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/core/bf16.h"
#include "origami/core/tensor.h"

namespace origami::infer {

class KvCache {
 public:
  // prefill_positions: the global position of each of the S prefill slots (a permutation of
  // 0..S-1). Allocated as MemCategory::KvCache.
  KvCache(MemoryTracker& tracker, std::int64_t layers, std::int64_t batch, std::int64_t capacity,
          std::int64_t width, const std::vector<std::int64_t>& prefill_positions,
          DType dtype = DType::F32);

  DType dtype() const { return dtype_; }
  std::int64_t batch() const { return batch_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t width() const { return width_; }
  std::int64_t prefill_slots() const { return prefill_; }
  float* k(std::int64_t layer, std::int64_t seq);
  float* v(std::int64_t layer, std::int64_t seq);
  const float* k(std::int64_t layer, std::int64_t seq) const;
  const float* v(std::int64_t layer, std::int64_t seq) const;
  // The same in a bf16 cache.
  bf16* k_bf16(std::int64_t layer, std::int64_t seq);
  bf16* v_bf16(std::int64_t layer, std::int64_t seq);
  // Where the prefill writes layer l's gathered K/V: [B, S, width] contiguous at the start of
  // the layer's storage (fp32) or in the staging buffer (bf16); spread_prefill(l) then moves
  // (narrows) each sequence to its [capacity] rows. In bf16 it must come before the next
  // layer's prefill_k/v.
  float* prefill_k(std::int64_t layer);
  float* prefill_v(std::int64_t layer);
  void spread_prefill(std::int64_t layer);

  std::int64_t slot_of(std::int64_t position) const;
  // Slots a query at `position` must scan (the rest hold positions > position): max(S, p+1).
  std::int64_t visible_slots(std::int64_t position) const;
  const std::vector<std::int64_t>& slot_positions() const { return positions_; }
  // Bytes of one layer's keys and values for all sequences (both tensors).
  std::int64_t bytes() const;

 private:
  std::int64_t batch_, capacity_, width_, prefill_;
  DType dtype_;
  std::vector<Tensor> k_, v_;               // per layer [B, capacity, width]
  Tensor stage_k_, stage_v_;                // bf16 only: one layer's prefill K/V [B, S, width]
  std::vector<std::int64_t> positions_;     // [capacity] position held by each slot
  std::vector<std::int64_t> prefill_slot_;  // [S] slot holding position p < S
};

}  // namespace origami::infer
