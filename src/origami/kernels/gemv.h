// The decode step's matrix products: a few token rows (one per sequence of the batch) times a
// weight stored [out, in], as linear_forward computes it, but streaming every weight once per
// call whatever the number of rows, so that a decode step is bound by the bytes of the weights
// and the memory bandwidth (docs/inference.md, "Decode at the bandwidth limit").
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

// Rows beyond which linear_forward_skinny is not meant to be used (its tiles keep every row of
// x in the first cache levels while a block of W streams past them): a larger batch is a GEMM.
inline constexpr std::int64_t kSkinnyMaxRows = 16;

// y[rows,out] (=|+=) x[rows,in] @ W^T, W [out,in] row-major, 0 <= rows <= kSkinnyMaxRows.
// Output rows of W are split over the calling rank's threads in fixed blocks, one W row
// streamed at a time; each y element is one dot product summed in a fixed order, so the result is
// bitwise the same for any thread count (and for any rows: row r's y does not depend on the other
// rows). ConfigError-free: bad sizes are ORIGAMI_CHECK failures (a caller's bug).
void linear_forward_skinny(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                           const float* W, float* y, bool accumulate = false);

// The same with bf16 weights (inference's --precision bf16): each W element widened to fp32
// (exact) and multiplied and summed in fp32 in the same order as above, so y is what the fp32
// kernel gives for the bf16 values of W, bitwise, at half the bytes read.
void linear_forward_skinny_bf16(std::int64_t rows, std::int64_t in, std::int64_t out,
                                const float* x, const bf16* W, float* y, bool accumulate = false);

}  // namespace origami::kernels
