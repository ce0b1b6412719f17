#include "origami/kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

namespace origami::kernels {

namespace {

void check_sizes(const char* what, std::int64_t rows, std::int64_t h) {
  ORIGAMI_CHECK(rows >= 0 && h >= 0, "{}: negative size rows={} h={}", what, rows, h);
  ORIGAMI_CHECK(rows == 0 || h > 0, "{}: hidden size 0 with {} rows (mean over no elements)",
                what, rows);
}

// Columns of dw one thread owns in the backward pass; accumulated in double on the stack.
constexpr std::int64_t kWeightBlock = 64;

// The loops are functions with plain pointer parameters, not lambda bodies: GCC reloads
// captured pointers after every store and then vectorises less.
void forward_rows(std::int64_t r0, std::int64_t r1, std::int64_t h, const float* x,
                  const float* w, float eps, float* y, float* rstd) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (std::int64_t j = 0; j < h; ++j) ss += xr[j] * xr[j];
    const float rs = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps);
    rstd[r] = rs;
#pragma omp simd
    for (std::int64_t j = 0; j < h; ++j) yr[j] = (xr[j] * rs) * w[j];
  }
}

// dx_j += r w_j dy_j - x_j r^3 / h * sum_k dy_k w_k x_k
void backward_input_rows(std::int64_t r0, std::int64_t r1, std::int64_t h, const float* x,
                         const float* w, const float* rstd, const float* dy, float* dx) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    float* dxr = dx + r * h;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t j = 0; j < h; ++j) dot += dyr[j] * w[j] * xr[j];
    const float rs = rstd[r];
    const float c = rs * rs * rs * dot / static_cast<float>(h);
#pragma omp simd
    for (std::int64_t j = 0; j < h; ++j) dxr[j] += rs * w[j] * dyr[j] - xr[j] * c;
  }
}

// dw_j += sum_r dy_rj x_rj r_r for the columns [j0, j1), over all rows in order.
void backward_weight_cols(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t h,
                          const float* x, const float* rstd, const float* dy, float* dw) {
  double acc[kWeightBlock] = {};
  const std::int64_t width = j1 - j0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h + j0;
    const float* dyr = dy + r * h + j0;
    const float rs = rstd[r];
#pragma omp simd
    for (std::int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(dyr[j] * xr[j] * rs);
  }
  for (std::int64_t j = 0; j < width; ++j) dw[j0 + j] += static_cast<float>(acc[j]);
}

}  // namespace

void rmsnorm_forward(std::int64_t rows, std::int64_t h, const float* x, const float* w, float eps,
                     float* y, float* rstd) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_sizes("rmsnorm_forward", rows, h);
  ORIGAMI_CHECK(eps >= 0.0f, "rmsnorm_forward: eps must be >= 0, got {}", eps);
  detail::parallel_for(rows, detail::rows_per_chunk(h), [=](std::int64_t r0, std::int64_t r1) {
    forward_rows(r0, r1, h, x, w, eps, y, rstd);
  });
}

void rmsnorm_backward(std::int64_t rows, std::int64_t h, const float* x, const float* w,
                      const float* rstd, const float* dy, float* dx, float* dw) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_sizes("rmsnorm_backward", rows, h);
  // dx: rows in parallel.
  detail::parallel_for(rows, detail::rows_per_chunk(h), [=](std::int64_t r0, std::int64_t r1) {
    backward_input_rows(r0, r1, h, x, w, rstd, dy, dx);
  });
  // dw: split over columns so that each column's sum runs over the rows in order on one
  // thread (deterministic for any thread count, no shared scratch).
  detail::parallel_for(h, kWeightBlock, [=](std::int64_t j0, std::int64_t j1) {
    backward_weight_cols(j0, j1, rows, h, x, rstd, dy, dw);
  });
}

}  // namespace origami::kernels
