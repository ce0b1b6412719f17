// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row.
#pragma once

#include <cstdint>

namespace origami::kernels {

// x, y: [rows, h]; w: [h]; rstd: [rows] receives 1/sqrt(mean(x^2)+eps), saved for backward.
void rmsnorm_forward(std::int64_t rows, std::int64_t h, const float* x, const float* w, float eps,
                     float* y, float* rstd);
// dx [rows,h] += ..., dw [h] += ...
void rmsnorm_backward(std::int64_t rows, std::int64_t h, const float* x, const float* w,
                      const float* rstd, const float* dy, float* dx, float* dw);

}  // namespace origami::kernels
