// Embedding lookup in a table that holds the rows [first_row, first_row + table_rows) of the
// full vocabulary (the whole table: first_row = 0, table_rows = V).
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

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

// The gather from the table's bf16 compute copy into bf16 rows (embedding_bf16.cpp): a row copy,
// exact; zeros for ids outside the table. The gradient's scatter-add stays fp32
// (embedding_backward above, on the fp32 gradient of dout).
void embedding_forward_bf16(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                            const bf16* table, std::int64_t first_row, std::int64_t table_rows,
                            bf16* out);

}  // namespace origami::kernels
