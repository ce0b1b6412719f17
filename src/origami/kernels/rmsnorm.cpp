// RMSNorm forward and backward on Highway vectors, compiled for every SIMD target and
// dispatched at run time (kernels/simd.h). A row's sums (sum x^2, sum dy w x) run on vector
// accumulators in a fixed order; dw's sums over rows are split over columns (kernels/README.md).
#include "origami/kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/rmsnorm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

#ifndef ORIGAMI_KERNELS_RMSNORM_SHARED_  // once, not per target
#define ORIGAMI_KERNELS_RMSNORM_SHARED_
namespace origami::kernels::rmsnorm_simd {
// Columns of dw one thread owns in the backward pass; accumulated in double on the stack.
constexpr std::int64_t kWeightBlock = 64;
}  // namespace origami::kernels::rmsnorm_simd
#endif

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::rmsnorm_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

void ForwardRows(std::int64_t r0, std::int64_t r1, std::int64_t h, const float* x,
                 const float* w, float eps, float* y, float* rstd) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    const float ss = SumOver(h, [&](std::int64_t j, std::int64_t count) {
      const VF xv = Load(xr + j, count);
      return hn::Mul(xv, xv);
    });
    const float rs = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps);
    rstd[r] = rs;
    const VF rsv = hn::Set(DF(), rs);
    ForEachVector(h, [&](std::int64_t j, std::int64_t count) {
      Store(hn::Mul(hn::Mul(Load(xr + j, count), rsv), Load(w + j, count)), yr + j, count);
    });
  }
}

// dx_j += r w_j dy_j - x_j r^3 / h * sum_k dy_k w_k x_k
void BackwardInputRows(std::int64_t r0, std::int64_t r1, std::int64_t h, const float* x,
                       const float* w, const float* rstd, const float* dy, float* dx) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    float* dxr = dx + r * h;
    const float dot = SumOver(h, [&](std::int64_t j, std::int64_t count) {
      return hn::Mul(hn::Mul(Load(dyr + j, count), Load(w + j, count)), Load(xr + j, count));
    });
    const float rs = rstd[r];
    const VF rsv = hn::Set(DF(), rs);
    const VF c = hn::Set(DF(), rs * rs * rs * dot / static_cast<float>(h));
    ForEachVector(h, [&](std::int64_t j, std::int64_t count) {
      const VF t = hn::Mul(hn::Mul(rsv, Load(w + j, count)), Load(dyr + j, count));
      Store(hn::Add(Load(dxr + j, count), hn::NegMulAdd(Load(xr + j, count), c, t)), dxr + j,
            count);
    });
  }
}

// dw_j += sum_r dy_rj x_rj r_r for the columns [j0, j1) (at most kWeightBlock), over all rows
// in order; the float products are summed in double. Four rows at a time, added one after the
// other (the same order as row by row), so that each accumulator is loaded and stored once per
// four rows.
void BackwardWeightCols(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t h,
                        const float* x, const float* rstd, const float* dy, float* dw) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as a vector has doubles
  HWY_ALIGN double acc[kWeightBlock] = {};
  const std::int64_t width = j1 - j0;
  // dy_rj x_rj r_r of row r, columns [j, j + count), in double.
  const auto term = [&](std::int64_t r, std::int64_t j, std::int64_t count) {
    const std::int64_t at = r * h + j0 + j;
    const auto prod = hn::Mul(hn::Mul(Load(df, dy + at, count), Load(df, x + at, count)),
                              hn::Set(df, rstd[r]));
    return hn::PromoteTo(dd, prod);
  };
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    ForEachVector(dd, width, [&](std::int64_t j, std::int64_t count) {
      auto a = Load(dd, acc + j, count);
      a = hn::Add(a, term(r, j, count));
      a = hn::Add(a, term(r + 1, j, count));
      a = hn::Add(a, term(r + 2, j, count));
      a = hn::Add(a, term(r + 3, j, count));
      Store(dd, a, acc + j, count);
    });
  }
  for (; r < rows; ++r) {
    ForEachVector(dd, width, [&](std::int64_t j, std::int64_t count) {
      Store(dd, hn::Add(Load(dd, acc + j, count), term(r, j, count)), acc + j, count);
    });
  }
  for (std::int64_t j = 0; j < width; ++j) dw[j0 + j] += static_cast<float>(acc[j]);
}

}  // namespace origami::kernels::rmsnorm_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace rmsnorm_simd {
HWY_EXPORT(ForwardRows);
HWY_EXPORT(BackwardInputRows);
HWY_EXPORT(BackwardWeightCols);
}  // namespace rmsnorm_simd

namespace {

void check_sizes(const char* what, std::int64_t rows, std::int64_t h) {
  ORIGAMI_CHECK(rows >= 0 && h >= 0, "{}: negative size rows={} h={}", what, rows, h);
  ORIGAMI_CHECK(rows == 0 || h > 0, "{}: hidden size 0 with {} rows (mean over no elements)",
                what, rows);
}

}  // namespace

void rmsnorm_forward(std::int64_t rows, std::int64_t h, const float* x, const float* w, float eps,
                     float* y, float* rstd) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_sizes("rmsnorm_forward", rows, h);
  ORIGAMI_CHECK(eps >= 0.0f, "rmsnorm_forward: eps must be >= 0, got {}", eps);
  detail::parallel_for(rows, detail::rows_per_chunk(h), [=](std::int64_t r0, std::int64_t r1) {
    HWY_DYNAMIC_DISPATCH(rmsnorm_simd::ForwardRows)(r0, r1, h, x, w, eps, y, rstd);
  });
}

void rmsnorm_backward(std::int64_t rows, std::int64_t h, const float* x, const float* w,
                      const float* rstd, const float* dy, float* dx, float* dw) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_sizes("rmsnorm_backward", rows, h);
  // dx: rows in parallel.
  detail::parallel_for(rows, detail::rows_per_chunk(h), [=](std::int64_t r0, std::int64_t r1) {
    HWY_DYNAMIC_DISPATCH(rmsnorm_simd::BackwardInputRows)(r0, r1, h, x, w, rstd, dy, dx);
  });
  // dw: split over columns so that each column's sum runs over the rows in order on one
  // thread (deterministic for any thread count, no shared scratch).
  detail::parallel_for(h, rmsnorm_simd::kWeightBlock, [=](std::int64_t j0, std::int64_t j1) {
    HWY_DYNAMIC_DISPATCH(rmsnorm_simd::BackwardWeightCols)(j0, j1, rows, h, x, rstd, dy, dw);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
