#include "origami/infer/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "origami/core/error.h"
#include "origami/core/float_ops.h"
#include "origami/kernels/convert.h"

namespace origami::infer {

KvCache::KvCache(MemoryTracker& tracker, std::int64_t layers, std::int64_t batch,
                 std::int64_t capacity, std::int64_t width,
                 const std::vector<std::int64_t>& prefill_positions, DType dtype)
    : batch_(batch),
      capacity_(capacity),
      width_(width),
      prefill_(static_cast<std::int64_t>(prefill_positions.size())),
      dtype_(dtype) {
  ORIGAMI_CHECK(dtype == DType::F32 || dtype == DType::BF16, "a KV cache in {}: F32 or BF16",
                dtype_name(dtype));
  ORIGAMI_CHECK(capacity_ >= prefill_, "a KV cache of {} slots cannot hold a {}-token prefill",
                capacity_, prefill_);
  for (std::int64_t l = 0; l < layers; ++l) {
    k_.emplace_back(tracker, MemCategory::KvCache, dtype, Shape{batch, capacity, width});
    v_.emplace_back(tracker, MemCategory::KvCache, dtype, Shape{batch, capacity, width});
  }
  if (dtype == DType::BF16) {
    stage_k_ = Tensor(tracker, MemCategory::Workspace, Shape{batch, prefill_, width});
    stage_v_ = Tensor(tracker, MemCategory::Workspace, Shape{batch, prefill_, width});
  }
  positions_.assign(static_cast<std::size_t>(capacity_), 0);
  prefill_slot_.assign(static_cast<std::size_t>(prefill_), -1);
  for (std::int64_t s = 0; s < prefill_; ++s) {
    const std::int64_t p = prefill_positions[static_cast<std::size_t>(s)];
    ORIGAMI_CHECK(p >= 0 && p < prefill_ && prefill_slot_[static_cast<std::size_t>(p)] < 0,
                  "prefill positions must be a permutation of 0..{}", prefill_ - 1);
    positions_[static_cast<std::size_t>(s)] = p;
    prefill_slot_[static_cast<std::size_t>(p)] = s;
  }
  for (std::int64_t s = prefill_; s < capacity_; ++s) positions_[static_cast<std::size_t>(s)] = s;
}

float* KvCache::k(std::int64_t layer, std::int64_t seq) {
  return float_at(k_[static_cast<std::size_t>(layer)].f32(), seq * capacity_ * width_);
}
float* KvCache::v(std::int64_t layer, std::int64_t seq) {
  return float_at(v_[static_cast<std::size_t>(layer)].f32(), seq * capacity_ * width_);
}
const float* KvCache::k(std::int64_t layer, std::int64_t seq) const {
  return float_at(k_[static_cast<std::size_t>(layer)].f32(), seq * capacity_ * width_);
}
const float* KvCache::v(std::int64_t layer, std::int64_t seq) const {
  return float_at(v_[static_cast<std::size_t>(layer)].f32(), seq * capacity_ * width_);
}

namespace {
// Sequence seq's rows of a bf16 layer tensor; null when unbacked (as float_at).
bf16* kv_bf16_rows(Tensor& t, std::int64_t offset) {
  ORIGAMI_CHECK(t.dtype() == DType::BF16, "a {} KV cache read as bf16", dtype_name(t.dtype()));
  auto* p = static_cast<bf16*>(t.raw());
  return p == nullptr ? nullptr : p + offset;
}
}  // namespace

bf16* KvCache::k_bf16(std::int64_t layer, std::int64_t seq) {
  return kv_bf16_rows(k_[static_cast<std::size_t>(layer)], seq * capacity_ * width_);
}
bf16* KvCache::v_bf16(std::int64_t layer, std::int64_t seq) {
  return kv_bf16_rows(v_[static_cast<std::size_t>(layer)], seq * capacity_ * width_);
}

float* KvCache::prefill_k(std::int64_t layer) {
  return dtype_ == DType::BF16 ? stage_k_.f32() : k(layer, 0);
}
float* KvCache::prefill_v(std::int64_t layer) {
  return dtype_ == DType::BF16 ? stage_v_.f32() : v(layer, 0);
}

void KvCache::spread_prefill(std::int64_t layer) {
  if (dtype_ == DType::BF16) {
    if (!stage_k_.backed() || stage_k_.numel() == 0) return;  // unbacked (dry run)
    for (std::int64_t b = 0; b < batch_; ++b) {
      const std::int64_t from = b * prefill_ * width_, n = prefill_ * width_;
      kernels::convert_to_bf16(n, float_at(stage_k_.f32(), from), k_bf16(layer, b));
      kernels::convert_to_bf16(n, float_at(stage_v_.f32(), from), v_bf16(layer, b));
    }
    if (layer + 1 == static_cast<std::int64_t>(k_.size())) {  // the prefill's last layer
      stage_k_ = Tensor();
      stage_v_ = Tensor();
    }
    return;
  }
  if (capacity_ == prefill_) return;
  // In place, last sequence first: sequence b moves from b*S rows to b*capacity rows, which
  // is never below where it is, so nothing not yet moved is overwritten.
  for (Tensor* t : {&k_[static_cast<std::size_t>(layer)], &v_[static_cast<std::size_t>(layer)]}) {
    float* base = t->f32();
    if (base == nullptr) continue;  // unbacked (dry run)
    for (std::int64_t b = batch_ - 1; b >= 1; --b)
      std::memmove(base + b * capacity_ * width_, base + b * prefill_ * width_,
                   static_cast<std::size_t>(prefill_ * width_) * sizeof(float));
  }
}

std::int64_t KvCache::slot_of(std::int64_t position) const {
  ORIGAMI_CHECK(position >= 0 && position < capacity_,
                "position {} is outside the KV cache of {} slots", position, capacity_);
  return position < prefill_ ? prefill_slot_[static_cast<std::size_t>(position)] : position;
}

std::int64_t KvCache::visible_slots(std::int64_t position) const {
  return std::max(prefill_, position + 1);
}

std::int64_t KvCache::bytes() const {
  std::int64_t n = 0;
  for (const Tensor& t : k_) n += 2 * t.bytes();
  return n;
}

}  // namespace origami::infer
