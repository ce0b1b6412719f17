// Inference's bf16 weights (`origami generate --precision bf16`, docs/inference.md): the
// matrices of a ModelTensors narrowed to bf16 in place, the embedding rows of such a table
// widened as they are gathered, and tensors copied as stored (the TSP prefill's shard packing,
// whose products read bf16).
#pragma once

#include <cstdint>

#include "origami/core/tensor.h"
#include "origami/model/weights.h"

namespace origami {

// Narrows every matrix (the embedding, W_Q, W_K, W_V, W_O, W_gate, W_up, W_down and an untied
// LM head) to bf16, rounding to nearest even, one tensor at a time: each fp32 tensor is freed
// as soon as its bf16 copy exists, so the resident weights never exceed the fp32 ones. The
// norms' weights stay fp32. A tensor already in bf16 is kept.
void narrow_matrices_to_bf16(ModelTensors& params);

// dst[dst_first, +n) = src[src_first, +n), element by element in their common dtype (bytes
// copied: F32 or BF16 alike). Nothing is copied when either is unbacked (dry run).
void copy_elements(const Tensor& src, std::int64_t src_first, Tensor& dst, std::int64_t dst_first,
                   std::int64_t n);

// kernels::embedding_forward from an F32 or BF16 table (rows widened exactly; zeros for ids
// outside the table's rows).
void embedding_rows_as_floats(std::int64_t tokens, std::int64_t h, const std::int32_t* ids,
                              const Tensor& table, std::int64_t first_row, std::int64_t table_rows,
                              float* out);

}  // namespace origami
