// Embedding gather (a row copy: glibc's memcpy, itself dispatched per CPU) and scatter-add
// (Highway vectors, compiled for every SIMD target and dispatched at run time, kernels/simd.h).
#include "origami/kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/embedding.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::embedding_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// The table gradient's columns [j0, j1): every token's row added in token order.
void ScatterAddCols(std::int64_t j0, std::int64_t j1, std::int64_t tokens, std::int64_t h,
                    const std::int32_t* ids, const float* dout, std::int64_t first_row,
                    std::int64_t table_rows, float* dtable) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < first_row || ids[t] >= first_row + table_rows) continue;  // another shard's
    AddInto(j1 - j0, dtable + (ids[t] - first_row) * h + j0, dout + t * h + j0);
  }
}

}  // namespace origami::kernels::embedding_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace embedding_simd {
HWY_EXPORT(ScatterAddCols);
}  // namespace embedding_simd

namespace {

void check_args(const char* what, std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                std::int64_t first_row, std::int64_t table_rows) {
  ORIGAMI_CHECK(tokens >= 0 && h >= 0, "{}: negative size tokens={} h={}", what, tokens, h);
  ORIGAMI_CHECK(first_row >= 0 && table_rows >= 0,
                "{}: the table's rows [{}, {} + {}) must not be negative", what, first_row,
                first_row, table_rows);
  for (std::int64_t t = 0; t < tokens; ++t)
    ORIGAMI_CHECK(ids[t] >= 0, "{}: token id {} at position {} is negative", what, ids[t], t);
}

bool in_table(std::int32_t id, std::int64_t first_row, std::int64_t table_rows) {
  return id >= first_row && id < first_row + table_rows;
}

// Columns of the table gradient one thread owns in the backward pass.
constexpr std::int64_t kColumnBlock = 64;

}  // namespace

void embedding_forward(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                       const float* table, std::int64_t first_row, std::int64_t table_rows,
                       float* out) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_args("embedding_forward", tokens, h, ids, first_row, table_rows);
  detail::parallel_for(tokens, detail::rows_per_chunk(h), [=](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      float* o = out + t * h;
      if (in_table(ids[t], first_row, table_rows)) {
        std::memcpy(o, table + (ids[t] - first_row) * h, static_cast<std::size_t>(h) * sizeof(float));
      } else {
        std::fill(o, o + h, 0.0f);
      }
    }
  });
}

void embedding_backward(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                        const float* dout, std::int64_t first_row, std::int64_t table_rows,
                        float* dtable) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_args("embedding_backward", tokens, h, ids, first_row, table_rows);
  // Tokens that share an id add into the same row, so threads split the columns, not the
  // tokens: each element is summed in token order by one thread (deterministic, no races).
  detail::parallel_for(h, kColumnBlock, [=](std::int64_t j0, std::int64_t j1) {
    HWY_DYNAMIC_DISPATCH(embedding_simd::ScatterAddCols)(j0, j1, tokens, h, ids, dout, first_row,
                                                         table_rows, dtable);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
