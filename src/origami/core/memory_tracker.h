// Per-rank memory accounting. Every tensor allocation goes through a tracker under one
// category, so the peak of each category (and of their sum) is measured, not estimated.
// An optional cap turns an over-budget allocation into an OutOfBudget error that names the
// category, the request and the budget.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "origami/core/dtype.h"

namespace origami {

enum class MemCategory : std::uint8_t {
  Parameters,
  Gradients,
  OptimizerState,
  Activations,  // saved for backward
  CommBuffers,  // receive buffers, foreign weight shards, gathered K/V
  Workspace,    // temporaries of one kernel or one block
  Logits,
  KvCache,  // inference: the keys and values kept for decoding
};
inline constexpr int kNumMemCategories = 8;

std::string_view mem_category_name(MemCategory c);

struct MemoryStats {
  std::array<std::int64_t, kNumMemCategories> current{};
  std::array<std::int64_t, kNumMemCategories> peak{};
  std::int64_t current_total = 0;
  std::int64_t peak_total = 0;  // peak of the sum, not the sum of the peaks
  std::int64_t allocations = 0;
};

class MemoryTracker {
 public:
  explicit MemoryTracker(std::string name = "rank 0") : name_(std::move(name)) {}
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Caps the total bytes held at once; nullopt removes the cap.
  void set_cap(std::optional<std::int64_t> bytes);
  std::optional<std::int64_t> cap() const;

  // When false, tensors are accounted but not backed by memory (the dry run): every F32
  // tensor of more than kDryRunBackedElements elements. Integer tensors (token ids, labels,
  // positions) and small F32 ones (loss sums, counts, norms, a few per-rank scalars) stay
  // backed, because the schedules branch on or index with them.
  static constexpr std::int64_t kDryRunBackedElements = 256;
  void set_backs_memory(bool backed) { backs_memory_ = backed; }
  bool backs_memory() const { return backs_memory_; }
  bool backs(DType dtype, std::int64_t numel) const {
    return backs_memory_ || dtype != DType::F32 || numel <= kDryRunBackedElements;
  }

  // Accounts F32 tensors with a precision profile's element sizes (the dry run; a real run
  // keeps 4 bytes): parameters, gradients, activations (also workspace), communication
  // buffers, logits at the profile's sizes; optimizer state at (master + 2 moments) / 2 bytes
  // per element, since AdamW allocates two state elements per parameter and the master
  // copy is spread over them. Tensors of other types are accounted at their own size.
  void set_element_bytes(MemCategory c, std::int64_t num, std::int64_t den);
  std::int64_t accounted_bytes(MemCategory c, DType dtype, std::int64_t numel) const;

  // Records an allocation; throws OutOfBudget (recording nothing) if it would exceed the cap.
  void on_alloc(MemCategory c, std::int64_t bytes);
  void on_free(MemCategory c, std::int64_t bytes);

  MemoryStats stats() const;
  std::int64_t current(MemCategory c) const;
  std::int64_t peak(MemCategory c) const;
  std::int64_t current_total() const;
  std::int64_t peak_total() const;

  // Starts a new peak window: every peak becomes the current value.
  void reset_peaks();

  const std::string& name() const { return name_; }

  // One line per category with current and peak, then the totals.
  std::string report() const;

 private:
  std::string name_;
  mutable std::mutex mutex_;  // receive buffers are allocated by progress threads too
  MemoryStats stats_;
  std::optional<std::int64_t> cap_;
  bool backs_memory_ = true;
  std::array<std::int64_t, kNumMemCategories> f32_num_{4, 4, 4, 4, 4, 4, 4, 4};
  std::array<std::int64_t, kNumMemCategories> f32_den_{1, 1, 1, 1, 1, 1, 1, 1};
};

// "1.50 MiB" style.
std::string format_bytes(std::int64_t bytes);

}  // namespace origami
