#include "origami/core/tensor.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace origami {

namespace {
constexpr std::size_t kAlignment = 64;  // one cache line; what AVX-512 loads like

// Transparent huge pages for large tensors. Linux's default THP mode, "madvise", gives 2-MiB
// pages only to memory that asks for them; with 4-KiB pages, streaming the weights once per
// decoded token misses the TLB on every page (measured on a Zen 3: decode 10-20 % faster
// with them, docs/inference.md). Blocks of at least kHugeMinBytes start on a 2-MiB
// boundary and ask for huge pages over their whole 2-MiB pages (not the tail: no page is
// backed beyond the tensor's bytes). Elsewhere (THP "never", other kernels) the advice is
// refused or ignored and nothing changes.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeMinBytes = std::size_t{4} << 20;

void* allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes < kHugeMinBytes) return std::aligned_alloc(kAlignment, rounded);
  // posix_memalign: aligned_alloc may refuse a size that is not a multiple of the alignment
  // (C11; AddressSanitizer does).
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, rounded) != 0) return nullptr;
  madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return p;
}

// glibc serves large blocks with mmap and returns them with munmap, so a training step that
// frees and reallocates its activations would page-fault every page again each step (seen as
// ~5% of a step in perf). Keep freed blocks in the heap instead; peak memory is unchanged.
void keep_freed_memory_in_heap() {
  static const bool once = [] {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, -1);
    return true;
  }();
  (void)once;
}
}  // namespace

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    ORIGAMI_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(MemoryTracker& tracker, MemCategory category, DType dtype, Shape shape)
    : tracker_(&tracker), category_(category), dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  const std::int64_t n = bytes();
  accounted_ = tracker.accounted_bytes(category_, dtype_, numel_);
  tracker.on_alloc(category_, accounted_);  // throws before anything is allocated
  if (n > 0 && tracker.backs(dtype_, numel_)) {
    keep_freed_memory_in_heap();
    data_ = allocate(static_cast<std::size_t>(n));
    if (data_ == nullptr) {
      tracker.on_free(category_, accounted_);
      throw OutOfBudget(fmt::format("{}: the system refused {} for {}", tracker.name(),
                                    format_bytes(n), mem_category_name(category_)));
    }
    std::memset(data_, 0, static_cast<std::size_t>(n));
  }
}

Tensor::~Tensor() { release(); }

void Tensor::release() {
  if (tracker_ != nullptr) tracker_->on_free(category_, accounted_);
  std::free(data_);
  data_ = nullptr;
  tracker_ = nullptr;
  shape_.clear();
  numel_ = 0;
  accounted_ = 0;
}

Tensor::Tensor(Tensor&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)),
      category_(other.category_),
      dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      numel_(std::exchange(other.numel_, 0)),
      accounted_(std::exchange(other.accounted_, 0)),
      data_(std::exchange(other.data_, nullptr)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release();
    tracker_ = std::exchange(other.tracker_, nullptr);
    category_ = other.category_;
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    numel_ = std::exchange(other.numel_, 0);
    accounted_ = std::exchange(other.accounted_, 0);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

std::int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int k = i < 0 ? i + n : i;
  ORIGAMI_CHECK(k >= 0 && k < n, "dimension {} out of range for shape {}", i, shape_str(shape_));
  return shape_[static_cast<std::size_t>(k)];
}

void Tensor::check_access(DType requested) const {
  ORIGAMI_CHECK(requested == dtype_, "tensor of {} read as {}", dtype_name(dtype_),
                dtype_name(requested));
}

void Tensor::reshape(Shape shape) {
  ORIGAMI_CHECK(shape_numel(shape) == numel_, "cannot reshape {} to {}", shape_str(shape_),
                shape_str(shape));
  shape_ = std::move(shape);
}

void Tensor::zero() {
  if (data_ != nullptr) std::memset(data_, 0, static_cast<std::size_t>(bytes()));
}

Tensor Tensor::clone(MemCategory category) const {
  ORIGAMI_CHECK(defined(), "clone of an undefined tensor");
  Tensor out(*tracker_, category, dtype_, shape_);
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  ORIGAMI_CHECK(src.dtype_ == dtype_ && src.numel_ == numel_, "copy of {} {} into {} {}",
                dtype_name(src.dtype_), shape_str(src.shape_), dtype_name(dtype_),
                shape_str(shape_));
  if (data_ != nullptr && src.data_ != nullptr)
    std::memcpy(data_, src.data_, static_cast<std::size_t>(bytes()));
}

}  // namespace origami
