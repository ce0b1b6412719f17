// Bulk moves of float data between tensors, for the strategy, model and training code. They
// exist for the dry run (docs/design.md §10): an unbacked tensor has a null data pointer, and a
// move into or out of one is accounted by the tracker but performs nothing. In a real run
// every pointer is backed and these are plain memcpy / memset / +=.
#pragma once

#include <cstdint>
#include <cstring>

namespace origami {

// dst[0..n) = src[0..n); nothing when either side is unbacked (null).
inline void copy_floats(float* dst, const float* src, std::int64_t n) {
  if (dst == nullptr || src == nullptr || n <= 0) return;
  std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
}

// dst[0..n) = 0; nothing when dst is unbacked.
inline void zero_floats(float* dst, std::int64_t n) {
  if (dst == nullptr || n <= 0) return;
  std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(float));
}

// dst[0..n) += src[0..n); nothing when either side is unbacked.
inline void add_floats(float* dst, const float* src, std::int64_t n) {
  if (dst == nullptr || src == nullptr) return;
  for (std::int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// dst[0..n) = value; nothing when dst is unbacked.
inline void fill_floats(float* dst, std::int64_t n, float value) {
  if (dst == nullptr) return;
  for (std::int64_t i = 0; i < n; ++i) dst[i] = value;
}

// p + offset, staying null for an unbacked tensor (null + offset would look backed).
inline float* float_at(float* p, std::int64_t offset) {
  return p == nullptr ? nullptr : p + offset;
}
inline const float* float_at(const float* p, std::int64_t offset) {
  return p == nullptr ? nullptr : p + offset;
}

}  // namespace origami
