// A dense, row-major, owning tensor that knows its element type and the memory category it
// is accounted under. Move-only: a copy is always an explicit clone(), so every byte that
// exists was allocated through a tracker.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "origami/core/dtype.h"
#include "origami/core/error.h"
#include "origami/core/memory_tracker.h"

namespace origami {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialised (when the tracker backs memory).
  Tensor(MemoryTracker& tracker, MemCategory category, DType dtype, Shape shape);
  // fp32 shorthand.
  Tensor(MemoryTracker& tracker, MemCategory category, Shape shape)
      : Tensor(tracker, category, DType::F32, std::move(shape)) {}
  ~Tensor();

  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  bool defined() const { return tracker_ != nullptr; }
  DType dtype() const { return dtype_; }
  MemCategory category() const { return category_; }
  MemoryTracker* tracker() const { return tracker_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int i) const;  // negative i counts from the end
  std::int64_t numel() const { return numel_; }
  std::int64_t bytes() const { return numel_ * static_cast<std::int64_t>(dtype_size(dtype_)); }
  // False in the dry run: the tensor is accounted but holds no memory.
  bool backed() const { return data_ != nullptr || numel_ == 0; }
  // The bytes the tracker accounts for this tensor (bytes() except under a dry-run profile).
  std::int64_t accounted_bytes() const { return accounted_; }

  template <class T>
  T* data() {
    check_access(dtype_of<T>());
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    check_access(dtype_of<T>());
    return static_cast<const T*>(data_);
  }
  float* f32() { return data<float>(); }
  const float* f32() const { return data<float>(); }
  std::span<float> span() { return {f32(), static_cast<std::size_t>(numel_)}; }
  std::span<const float> span() const { return {f32(), static_cast<std::size_t>(numel_)}; }
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  // Same elements, new shape with the same number of elements.
  void reshape(Shape shape);
  void zero();
  // A new tensor with the same contents, accounted under `category` on the same tracker.
  Tensor clone(MemCategory category) const;
  Tensor clone() const { return clone(category_); }
  // Copies the contents of `src` (same dtype and numel).
  void copy_from(const Tensor& src);

 private:
  void check_access(DType requested) const;
  void release();

  MemoryTracker* tracker_ = nullptr;
  MemCategory category_ = MemCategory::Workspace;
  DType dtype_ = DType::F32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::int64_t accounted_ = 0;  // bytes recorded on the tracker (the dry run's profile)
  void* data_ = nullptr;
};

}  // namespace origami
