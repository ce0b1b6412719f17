// AdamW (decoupled weight decay, bias-corrected moments, as torch.optim.AdamW) and the pieces
// of global-norm gradient clipping. The reductions across tensors and ranks are the caller's.
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// One step (step is 1-based) on n elements: param -= lr*wd*param; moments updated;
// param -= lr * m_hat / (sqrt(v_hat) + eps). weight_decay 0 disables decay for this tensor.
void adamw_step(std::int64_t n, float* param, const float* grad, float* m, float* v,
                const AdamWHyper& hyper, std::int64_t step);
// The same with bf16 gradients (--grad-reduce-dtype bf16), widened exactly: bitwise the fp32
// step on float(grad).
void adamw_step(std::int64_t n, float* param, const bf16* grad, float* m, float* v,
                const AdamWHyper& hyper, std::int64_t step);

// Sum of squares, accumulated in double (bf16: of the widened values, exact in double too).
double sum_of_squares(std::int64_t n, const float* x);
double sum_of_squares(std::int64_t n, const bf16* x);
// x *= s (bf16: the fp32 product rounded to nearest even).
void scale_inplace(std::int64_t n, float* x, float s);
void scale_inplace(std::int64_t n, bf16* x, float s);
// The factor torch.nn.utils.clip_grad_norm_ applies: min(1, max_norm / (total_norm + 1e-6)).
float clip_coefficient(double total_norm, double max_norm);

}  // namespace origami::kernels
