// Embedding lookup in a table that holds the rows [first_row, first_row + table_rows) of the
// full vocabulary (the whole table: first_row = 0, table_rows = V).
#pragma once

#include <cstdint>

namespace origami::kernels {

// out[t] = table[ids[t] - first_row] when the id lies in the table's range, else zeros.
// Ids must be >= 0 (the caller validates against the vocabulary; see data loading).
void embedding_forward(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                       const float* table, std::int64_t first_row, std::int64_t table_rows,
                       float* out);
// dtable[ids[t] - first_row] += dout[t] for ids in range.
void embedding_backward(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                        const float* dout, std::int64_t first_row, std::int64_t table_rows,
                        float* dtable);

}  // namespace origami::kernels
