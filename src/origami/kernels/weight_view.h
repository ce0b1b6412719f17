// A weight matrix as linear_forward and linear_backward_input read it (kernels/gemm.h): fp32
// (fp32 training and inference) or bf16 (inference under --precision bf16, whose prefill
// multiplies its bf16 shards without widening them first: docs/inference.md; training's bf16
// compute copy: core/precision.h). Built implicitly from either pointer on purpose, so that
// every fp32 caller reads as before; code that has no bf16 path reads f32(), which refuses a
// bf16 view.
#pragma once

#include <cstddef>
#include <cstdint>

#include "origami/core/bf16.h"
#include "origami/core/dtype.h"
#include "origami/core/error.h"

namespace origami::kernels {

class WeightView {
 public:
  WeightView() = default;
  WeightView(std::nullptr_t) {}                                      // NOLINT(google-explicit-constructor)
  WeightView(const float* w) : data_(w) {}                         // NOLINT(google-explicit-constructor)
  WeightView(const bf16* w) : data_(w), dtype_(DType::BF16) {}     // NOLINT(google-explicit-constructor)
  WeightView(const void* w, DType dtype) : data_(w), dtype_(dtype) {
    ORIGAMI_CHECK(dtype == DType::F32 || dtype == DType::BF16, "a {} weight: F32 or BF16",
                  dtype_name(dtype));
  }

  DType dtype() const { return dtype_; }
  bool is_bf16() const { return dtype_ == DType::BF16; }
  const void* raw() const { return data_; }
  const float* f32() const {
    ORIGAMI_CHECK(!is_bf16(), "a bf16 weight read as fp32 (only the linear products take bf16)");
    return static_cast<const float*>(data_);
  }
  const bf16* bf16s() const {
    ORIGAMI_CHECK(is_bf16(), "an fp32 weight read as bf16");
    return static_cast<const bf16*>(data_);
  }
  // The view `elements` elements further on (a packed shard's next matrix).
  WeightView at(std::int64_t elements) const {
    if (data_ == nullptr) return *this;  // an unbacked (dry-run) shard stays unbacked
    return is_bf16() ? WeightView(bf16s() + elements) : WeightView(f32() + elements);
  }

 private:
  const void* data_ = nullptr;
  DType dtype_ = DType::F32;
};

}  // namespace origami::kernels
