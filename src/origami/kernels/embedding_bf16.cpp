// The embedding gather into bf16 rows (embedding.h): a row copy of the table's bf16 compute
// copy (glibc's memcpy, itself dispatched per CPU), so it is exact and needs no SIMD target.
#include <algorithm>
#include <cstring>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/embedding.h"
#include "origami/kernels/parallel.h"

namespace origami::kernels {

void embedding_forward_bf16(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                            const bf16* table, std::int64_t first_row, std::int64_t table_rows,
                            bf16* out) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(tokens >= 0 && h >= 0, "embedding_forward_bf16: negative size tokens={} h={}",
                tokens, h);
  ORIGAMI_CHECK(first_row >= 0 && table_rows >= 0,
                "embedding_forward_bf16: the table's rows [{}, {} + {}) must not be negative",
                first_row, first_row, table_rows);
  for (std::int64_t t = 0; t < tokens; ++t)
    ORIGAMI_CHECK(ids[t] >= 0, "embedding_forward_bf16: token id {} at position {} is negative",
                  ids[t], t);
  detail::parallel_for(tokens, detail::rows_per_chunk(h), [=](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      bf16* o = out + t * h;
      if (ids[t] >= first_row && ids[t] < first_row + table_rows) {
        std::memcpy(o, table + (ids[t] - first_row) * h,
                    static_cast<std::size_t>(h) * sizeof(bf16));
      } else {
        std::fill(o, o + h, bf16{});
      }
    }
  });
}

}  // namespace origami::kernels
