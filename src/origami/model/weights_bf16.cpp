#include "origami/model/weights_bf16.h"

#include <algorithm>
#include <cstring>

#include "origami/core/error.h"
#include "origami/core/float_ops.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/embedding.h"

namespace origami {

namespace {

void narrow_one_to_bf16(Tensor& t) {
  if (!t.defined() || t.dtype() == DType::BF16) return;
  ORIGAMI_CHECK(t.dtype() == DType::F32, "narrow_matrices_to_bf16: a {} tensor",
                dtype_name(t.dtype()));
  Tensor b(*t.tracker(), t.category(), DType::BF16, t.shape());
  if (t.backed() && b.backed())
    kernels::convert_to_bf16(t.numel(), t.f32(), static_cast<bf16*>(b.raw()));
  t = std::move(b);  // frees the fp32 storage
}

}  // namespace

void narrow_matrices_to_bf16(ModelTensors& params) {
  narrow_one_to_bf16(params.embed);
  for (LayerTensors& L : params.layers)
    for (Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      narrow_one_to_bf16(*t);
  if (!params.tied) narrow_one_to_bf16(params.lm_head);
}

void copy_elements(const Tensor& src, std::int64_t src_first, Tensor& dst, std::int64_t dst_first,
                   std::int64_t n) {
  ORIGAMI_CHECK(src.dtype() == dst.dtype(), "copy_elements: {} into {}", dtype_name(src.dtype()),
                dtype_name(dst.dtype()));
  ORIGAMI_CHECK(src_first >= 0 && dst_first >= 0 && n >= 0 && src_first + n <= src.numel() &&
                    dst_first + n <= dst.numel(),
                "copy_elements: [{}, +{}) of {} into [{}, +{}) of {}", src_first, n, src.numel(),
                dst_first, n, dst.numel());
  if (!src.backed() || !dst.backed() || n == 0) return;
  const auto size = static_cast<std::size_t>(dtype_size(src.dtype()));
  std::memcpy(static_cast<char*>(dst.raw()) + static_cast<std::size_t>(dst_first) * size,
              static_cast<const char*>(src.raw()) + static_cast<std::size_t>(src_first) * size,
              static_cast<std::size_t>(n) * size);
}

void embedding_rows_as_floats(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                              const Tensor& table, std::int64_t first_row, std::int64_t table_rows,
                              float* out) {
  if (table.dtype() != DType::BF16) {
    kernels::embedding_forward(tokens, h, ids, table.backed() ? table.f32() : nullptr, first_row,
                               table_rows, out);
    return;
  }
  if (!table.backed()) return;
  const auto* rows = static_cast<const bf16*>(table.raw());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t r = ids[t] - first_row;
    float* o = out + t * h;
    if (r >= 0 && r < table_rows) {
      kernels::convert_to_float(h, rows + r * h, o);
    } else {
      std::fill(o, o + h, 0.0f);
    }
  }
}

}  // namespace origami
