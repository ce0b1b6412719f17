// Array conversions between fp32 and bf16 (core/bf16.h gives the rounding: to nearest, ties to
// even, NaN kept), vectorised for every SIMD target and threaded like the element-wise kernels
// (results independent of the thread count). The casts at every bf16 boundary of the engine —
// weights to their compute copy, activations saved, tensors sent — go through these two.
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

// out[i] = bf16(in[i]) for i < n.
void convert_to_bf16(std::int64_t n, const float* in, bf16* out);

// out[i] = float(in[i]) for i < n (exact).
void convert_to_float(std::int64_t n, const bf16* in, float* out);

// x[i] = float(bf16(x[i])) for i < n: fp32 values that a bf16 holds exactly (training's K/V
// under --precision bf16, so that gathering them in bf16 loses nothing).
void round_floats_to_bf16(std::int64_t n, float* x);

}  // namespace origami::kernels
