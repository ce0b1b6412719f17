#include "origami/kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

namespace origami::kernels {

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
    for (std::int64_t t = 0; t < tokens; ++t) {
      if (!in_table(ids[t], first_row, table_rows)) continue;
      const float* src = dout + t * h;
      float* dst = dtable + (ids[t] - first_row) * h;
#pragma omp simd
      for (std::int64_t j = j0; j < j1; ++j) dst[j] += src[j];
    }
  });
}

}  // namespace origami::kernels
