// RMSNorm forward and backward on Highway vectors, compiled for every SIMD target and
// dispatched at run time (kernels/simd.h). A row's sums (sum x^2, sum dy w x) run on vector
// accumulators in a fixed order; dw's sums over rows are split over columns (kernels/README.md).
// One body serves fp32 and bf16 activations (T = float or bf16 bits: x, y, dy, dx; the weight,
// rstd and dw stay fp32), through bf16_vec-inl.h's LoadAs/StoreAs: each bf16 output is rounded
// once and dx accumulates as bf16(float(dx) + term).
#include "origami/kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/rmsnorm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

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

template <class T>
void ForwardRowsOf(std::int64_t r0, std::int64_t r1, std::int64_t h, const T* x, const float* w,
                   float eps, T* y, float* rstd) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * h;
    T* yr = y + r * h;
    const float ss = SumOver(h, [&](std::int64_t j, std::int64_t count) {
      const VF xv = LoadAs(xr + j, count);
      return hn::Mul(xv, xv);
    });
    const float rs = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps);
    rstd[r] = rs;
    const VF rsv = hn::Set(DF(), rs);
    ForEachVector(h, [&](std::int64_t j, std::int64_t count) {
      StoreAs(hn::Mul(hn::Mul(LoadAs(xr + j, count), rsv), Load(w + j, count)), yr + j, count);
    });
  }
}

// dx_j += r w_j dy_j - x_j r^3 / h * sum_k dy_k w_k x_k
template <class T>
void BackwardInputRowsOf(std::int64_t r0, std::int64_t r1, std::int64_t h, const T* x,
                         const float* w, const float* rstd, const T* dy, T* dx) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * h;
    const T* dyr = dy + r * h;
    T* dxr = dx + r * h;
    const float dot = SumOver(h, [&](std::int64_t j, std::int64_t count) {
      return hn::Mul(hn::Mul(LoadAs(dyr + j, count), Load(w + j, count)), LoadAs(xr + j, count));
    });
    const float rs = rstd[r];
    const VF rsv = hn::Set(DF(), rs);
    const VF c = hn::Set(DF(), rs * rs * rs * dot / static_cast<float>(h));
    ForEachVector(h, [&](std::int64_t j, std::int64_t count) {
      const VF t = hn::Mul(hn::Mul(rsv, Load(w + j, count)), LoadAs(dyr + j, count));
      StoreAs(hn::Add(LoadAs(dxr + j, count), hn::NegMulAdd(LoadAs(xr + j, count), c, t)),
              dxr + j, count);
    });
  }
}

// dw_j += sum_r dy_rj x_rj r_r for the columns [j0, j1) (at most kWeightBlock), over all rows
// in order; the float products are summed in double. Four rows at a time, added one after the
// other (the same order as row by row), so that each accumulator is loaded and stored once per
// four rows.
template <class T>
void BackwardWeightColsOf(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t h,
                          const T* x, const float* rstd, const T* dy, float* dw) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as a vector has doubles
  HWY_ALIGN double acc[kWeightBlock] = {};
  const std::int64_t width = j1 - j0;
  // dy_rj x_rj r_r of row r, columns [j, j + count), in double.
  const auto term = [&](std::int64_t r, std::int64_t j, std::int64_t count) {
    const std::int64_t at = r * h + j0 + j;
    const auto prod = hn::Mul(hn::Mul(LoadAs(df, dy + at, count), LoadAs(df, x + at, count)),
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

using Bits = std::uint16_t;  // bf16
void ForwardRows(std::int64_t r0, std::int64_t r1, std::int64_t h, const float* x, const float* w,
                 float eps, float* y, float* rstd) {
  ForwardRowsOf(r0, r1, h, x, w, eps, y, rstd);
}
void ForwardRowsBf16(std::int64_t r0, std::int64_t r1, std::int64_t h, const Bits* x,
                     const float* w, float eps, Bits* y, float* rstd) {
  ForwardRowsOf(r0, r1, h, x, w, eps, y, rstd);
}
void BackwardInputRows(std::int64_t r0, std::int64_t r1, std::int64_t h, const float* x,
                       const float* w, const float* rstd, const float* dy, float* dx) {
  BackwardInputRowsOf(r0, r1, h, x, w, rstd, dy, dx);
}
void BackwardInputRowsBf16(std::int64_t r0, std::int64_t r1, std::int64_t h, const Bits* x,
                           const float* w, const float* rstd, const Bits* dy, Bits* dx) {
  BackwardInputRowsOf(r0, r1, h, x, w, rstd, dy, dx);
}
void BackwardWeightCols(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t h,
                        const float* x, const float* rstd, const float* dy, float* dw) {
  BackwardWeightColsOf(j0, j1, rows, h, x, rstd, dy, dw);
}
void BackwardWeightColsBf16(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t h,
                            const Bits* x, const float* rstd, const Bits* dy, float* dw) {
  BackwardWeightColsOf(j0, j1, rows, h, x, rstd, dy, dw);
}

}  // namespace origami::kernels::rmsnorm_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace rmsnorm_simd {
HWY_EXPORT(ForwardRows);
HWY_EXPORT(BackwardInputRows);
HWY_EXPORT(BackwardWeightCols);
HWY_EXPORT(ForwardRowsBf16);
HWY_EXPORT(BackwardInputRowsBf16);
HWY_EXPORT(BackwardWeightColsBf16);
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

void rmsnorm_forward_bf16(std::int64_t rows, std::int64_t h, const bf16* x, const float* w,
                          float eps, bf16* y, float* rstd) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_sizes("rmsnorm_forward_bf16", rows, h);
  ORIGAMI_CHECK(eps >= 0.0f, "rmsnorm_forward_bf16: eps must be >= 0, got {}", eps);
  const std::uint16_t* xb = bf16_bits(x);
  std::uint16_t* yb = bf16_bits(y);
  detail::parallel_for(rows, detail::rows_per_chunk(h), [=](std::int64_t r0, std::int64_t r1) {
    HWY_DYNAMIC_DISPATCH(rmsnorm_simd::ForwardRowsBf16)(r0, r1, h, xb, w, eps, yb, rstd);
  });
}

void rmsnorm_backward_bf16(std::int64_t rows, std::int64_t h, const bf16* x, const float* w,
                           const float* rstd, const bf16* dy, bf16* dx, float* dw) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_sizes("rmsnorm_backward_bf16", rows, h);
  const std::uint16_t* xb = bf16_bits(x);
  const std::uint16_t* dyb = bf16_bits(dy);
  std::uint16_t* dxb = bf16_bits(dx);
  detail::parallel_for(rows, detail::rows_per_chunk(h), [=](std::int64_t r0, std::int64_t r1) {
    HWY_DYNAMIC_DISPATCH(rmsnorm_simd::BackwardInputRowsBf16)(r0, r1, h, xb, w, rstd, dyb, dxb);
  });
  // dw: split over columns, each column summed over the rows in order on one thread.
  detail::parallel_for(h, rmsnorm_simd::kWeightBlock, [=](std::int64_t j0, std::int64_t j1) {
    HWY_DYNAMIC_DISPATCH(rmsnorm_simd::BackwardWeightColsBf16)(j0, j1, rows, h, xb, rstd, dyb, dw);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
