#include "origami/model/saved_dtype.h"

#include "origami/core/error.h"
#include "origami/kernels/convert.h"

namespace origami {

Tensor copy_in(DType dtype, const Tensor& src, MemCategory category) {
  if (!src.defined()) return {};
  Tensor out(*src.tracker(), category, dtype, src.shape());
  if (!src.backed() || !out.backed() || src.numel() == 0) return out;  // dry run
  if (dtype == src.dtype()) {
    out.copy_from(src);
  } else if (dtype == DType::BF16 && src.dtype() == DType::F32) {
    kernels::convert_to_bf16(src.numel(), src.f32(), static_cast<bf16*>(out.raw()));
  } else if (dtype == DType::F32 && src.dtype() == DType::BF16) {
    kernels::convert_to_float(src.numel(), static_cast<const bf16*>(src.raw()), out.f32());
  } else {
    ORIGAMI_CHECK(false, "copy_in: no conversion from {} to {}", dtype_name(src.dtype()),
                  dtype_name(dtype));
  }
  return out;
}

void store_in(DType dtype, Tensor& t) {
  if (t.defined() && t.dtype() != dtype) t = copy_in(dtype, t, t.category());
}

void restore_f32(Tensor& t, MemCategory category) {
  if (t.defined() && t.dtype() != DType::F32) t = copy_in(DType::F32, t, category);
}

void store_in(DType dtype, AttentionSaved& s) {
  for (Tensor* t : {&s.q, &s.k, &s.v, &s.out}) store_in(dtype, *t);
}
void store_in(DType dtype, MlpSaved& s) {
  if (s.router_logits.defined()) return;  // experts: fp32 (bf16 training refuses them)
  for (Tensor* t : {&s.a, &s.u}) store_in(dtype, *t);
}
void restore_f32(AttentionSaved& s, MemCategory category) {
  for (Tensor* t : {&s.q, &s.k, &s.v, &s.out}) restore_f32(*t, category);
}
void restore_f32(MlpSaved& s, MemCategory category) {
  for (Tensor* t : {&s.a, &s.u}) restore_f32(*t, category);
}

}  // namespace origami
