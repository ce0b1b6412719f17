#include "origami/core/memory_tracker.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami {

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Parameters: return "parameters";
    case MemCategory::Gradients: return "gradients";
    case MemCategory::OptimizerState: return "optimizer state";
    case MemCategory::Activations: return "saved activations";
    case MemCategory::CommBuffers: return "communication buffers";
    case MemCategory::Workspace: return "workspace";
    case MemCategory::Logits: return "logits";
    case MemCategory::KvCache: return "KV cache";
  }
  return "?";
}

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1 << 20)) return fmt::format("{:.2f} KiB", b / 1024);
  if (bytes < (std::int64_t{1} << 30)) return fmt::format("{:.2f} MiB", b / (1 << 20));
  return fmt::format("{:.2f} GiB", b / (std::int64_t{1} << 30));
}

void MemoryTracker::set_cap(std::optional<std::int64_t> bytes) {
  std::lock_guard lock(mutex_);
  cap_ = bytes;
}

std::optional<std::int64_t> MemoryTracker::cap() const {
  std::lock_guard lock(mutex_);
  return cap_;
}

void MemoryTracker::set_element_bytes(MemCategory c, std::int64_t num, std::int64_t den) {
  ORIGAMI_CHECK(num > 0 && den > 0, "element size {}/{} must be positive", num, den);
  std::lock_guard lock(mutex_);
  f32_num_[static_cast<std::size_t>(c)] = num;
  f32_den_[static_cast<std::size_t>(c)] = den;
}

std::int64_t MemoryTracker::accounted_bytes(MemCategory c, DType dtype, std::int64_t numel) const {
  if (dtype != DType::F32) return numel * static_cast<std::int64_t>(dtype_size(dtype));
  const auto i = static_cast<std::size_t>(c);
  return numel * f32_num_[i] / f32_den_[i];
}

void MemoryTracker::on_alloc(MemCategory c, std::int64_t bytes) {
  ORIGAMI_CHECK(bytes >= 0, "negative allocation of {} bytes", bytes);
  std::lock_guard lock(mutex_);
  const auto i = static_cast<int>(c);
  if (cap_ && stats_.current_total + bytes > *cap_) {
    throw OutOfBudget(fmt::format(
        "{}: allocating {} of {} would exceed the memory cap of {} ({} already held); "
        "raise the cap or shrink the run (sequence, batch, recompute policy, degree)",
        name_, format_bytes(bytes), mem_category_name(c), format_bytes(*cap_),
        format_bytes(stats_.current_total)));
  }
  stats_.current[i] += bytes;
  stats_.current_total += bytes;
  stats_.allocations += 1;
  if (stats_.current[i] > stats_.peak[i]) stats_.peak[i] = stats_.current[i];
  if (stats_.current_total > stats_.peak_total) stats_.peak_total = stats_.current_total;
}

void MemoryTracker::on_free(MemCategory c, std::int64_t bytes) {
  std::lock_guard lock(mutex_);
  const auto i = static_cast<int>(c);
  stats_.current[i] -= bytes;
  stats_.current_total -= bytes;
}

MemoryStats MemoryTracker::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::int64_t MemoryTracker::current(MemCategory c) const {
  std::lock_guard lock(mutex_);
  return stats_.current[static_cast<int>(c)];
}

std::int64_t MemoryTracker::peak(MemCategory c) const {
  std::lock_guard lock(mutex_);
  return stats_.peak[static_cast<int>(c)];
}

std::int64_t MemoryTracker::current_total() const {
  std::lock_guard lock(mutex_);
  return stats_.current_total;
}

std::int64_t MemoryTracker::peak_total() const {
  std::lock_guard lock(mutex_);
  return stats_.peak_total;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mutex_);
  stats_.peak = stats_.current;
  stats_.peak_total = stats_.current_total;
}

std::string MemoryTracker::report() const {
  const MemoryStats s = stats();
  std::string out;
  for (int i = 0; i < kNumMemCategories; ++i) {
    out += fmt::format("  {:<22} current {:>12}  peak {:>12}\n",
                       mem_category_name(static_cast<MemCategory>(i)), format_bytes(s.current[i]),
                       format_bytes(s.peak[i]));
  }
  out += fmt::format("  {:<22} current {:>12}  peak {:>12}\n", "total", format_bytes(s.current_total),
                     format_bytes(s.peak_total));
  return out;
}

}  // namespace origami
