// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row.
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

// x, y: [rows, h]; w: [h]; rstd: [rows] receives 1/sqrt(mean(x^2)+eps), saved for backward.
void rmsnorm_forward(std::int64_t rows, std::int64_t h, const float* x, const float* w, float eps,
                     float* y, float* rstd);
// dx [rows,h] += ..., dw [h] += ...
void rmsnorm_backward(std::int64_t rows, std::int64_t h, const float* x, const float* w,
                      const float* rstd, const float* dy, float* dx, float* dw);

// bf16 activations (rmsnorm.cpp, the same template as fp32): x, y, dy, dx in bf16; w, rstd, dw in fp32. The sums and
// the products run in fp32 on the widened inputs and each bf16 output is rounded once (to
// nearest even); dx accumulates as dx = bf16(float(dx) + term), one rounding per call.
void rmsnorm_forward_bf16(std::int64_t rows, std::int64_t h, const bf16* x, const float* w,
                          float eps, bf16* y, float* rstd);
void rmsnorm_backward_bf16(std::int64_t rows, std::int64_t h, const bf16* x, const float* w,
                           const float* rstd, const bf16* dy, bf16* dx, float* dw);

}  // namespace origami::kernels
