// The gated MLP's elementwise part: g = silu(a) * u, silu(a) = a * sigmoid(a).
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

void swiglu_forward(std::int64_t n, const float* a, const float* u, float* g);
// da += dg * u * silu'(a);  du += dg * silu(a)
void swiglu_backward(std::int64_t n, const float* a, const float* u, const float* dg, float* da,
                     float* du);

// bf16 arrays (swiglu.cpp, the same template as fp32): the same formulas in fp32 on the widened inputs, each output
// rounded once to bf16 (nearest even); da and du accumulate as bf16(float(da) + term).
void swiglu_forward_bf16(std::int64_t n, const bf16* a, const bf16* u, bf16* g);
void swiglu_backward_bf16(std::int64_t n, const bf16* a, const bf16* u, const bf16* dg, bf16* da,
                          bf16* du);

}  // namespace origami::kernels
