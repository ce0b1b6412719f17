// The gated MLP's elementwise part: g = silu(a) * u, silu(a) = a * sigmoid(a).
#pragma once

#include <cstdint>

namespace origami::kernels {

void swiglu_forward(std::int64_t n, const float* a, const float* u, float* g);
// da += dg * u * silu'(a);  du += dg * silu(a)
void swiglu_backward(std::int64_t n, const float* a, const float* u, const float* dg, float* da,
                     float* du);

}  // namespace origami::kernels
