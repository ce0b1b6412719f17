// Typed views of memory handed to the communicator. A buffer never owns memory: the caller
// keeps it alive until the operation's handle completes. Byte counts are count * dtype_size,
// so they are exact for every element type (fp32 today, bf16 and fp64 later).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "origami/core/dtype.h"
#include "origami/core/tensor.h"

namespace origami::comm {

struct Buffer {
  void* data = nullptr;
  std::int64_t count = 0;
  DType dtype = DType::F32;

  Buffer() = default;
  Buffer(void* d, std::int64_t n, DType t) : data(d), count(n), dtype(t) {}
  // Implicit on purpose: every operation also takes a Tensor directly.
  Buffer(Tensor& t) : data(t.raw()), count(t.numel()), dtype(t.dtype()) {}  // NOLINT
  template <class T>
  Buffer(std::vector<T>& v)  // NOLINT
      : data(v.data()), count(static_cast<std::int64_t>(v.size())), dtype(dtype_of<T>()) {}
  template <class T>
  Buffer(std::span<T> s)  // NOLINT
      : data(s.data()), count(static_cast<std::int64_t>(s.size())), dtype(dtype_of<T>()) {}

  std::int64_t bytes() const { return count * static_cast<std::int64_t>(dtype_size(dtype)); }
};

struct ConstBuffer {
  const void* data = nullptr;
  std::int64_t count = 0;
  DType dtype = DType::F32;

  ConstBuffer() = default;
  ConstBuffer(const void* d, std::int64_t n, DType t) : data(d), count(n), dtype(t) {}
  ConstBuffer(Buffer b) : data(b.data), count(b.count), dtype(b.dtype) {}  // NOLINT
  ConstBuffer(const Tensor& t) : data(t.raw()), count(t.numel()), dtype(t.dtype()) {}  // NOLINT
  ConstBuffer(Tensor& t) : ConstBuffer(static_cast<const Tensor&>(t)) {}  // NOLINT
  template <class T>
  ConstBuffer(const std::vector<T>& v)  // NOLINT
      : data(v.data()), count(static_cast<std::int64_t>(v.size())), dtype(dtype_of<T>()) {}
  template <class T>
  ConstBuffer(std::span<const T> s)  // NOLINT
      : data(s.data()), count(static_cast<std::int64_t>(s.size())), dtype(dtype_of<T>()) {}

  std::int64_t bytes() const { return count * static_cast<std::int64_t>(dtype_size(dtype)); }
};

}  // namespace origami::comm
