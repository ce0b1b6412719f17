// Skinny linear products for decode (gemv.h) on Highway vectors, compiled for every SIMD target
// and dispatched at run time (kernels/simd.h). A tile is J consecutive rows of W against R rows
// of x: each W vector is loaded once and multiplied into the R accumulators, so W streams from
// memory once per call and the x rows (at most kSkinnyMaxRows of `in` floats) stay in L1/L2.
// Each (W row, x row) pair has one vector accumulator over the whole row, whatever J and R are,
// so every y element is summed in the same order by every tile shape and thread count.
#include "origami/kernels/gemv.h"

#include <algorithm>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/gemv.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

#ifndef ORIGAMI_KERNELS_GEMV_SHARED_  // once, not per target
#define ORIGAMI_KERNELS_GEMV_SHARED_
namespace origami::kernels::gemv_simd {
// W rows per tile: four independent accumulator chains for a single x row (an FMA's latency
// hidden), four concurrent streams for the prefetcher.
constexpr std::int64_t kWRows = 4;
}  // namespace origami::kernels::gemv_simd
#endif

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::gemv_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// x rows per tile: J*R accumulators, R x vectors and one W vector in registers (21 of AVX-512's
// 32 with R = 4, 11 of AVX2's and SSE's 16 with R = 2).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kXRows = 4;
#else
constexpr int kXRows = 2;
#endif

// y[r*ldy + j] (=|+=) dot(x row r, W row j) for J W rows from w and R x rows from x.
template <int J, int R>
HWY_INLINE void Tile(std::int64_t in, const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                     float* y, std::int64_t ldy, bool accumulate) {
  const DF d;
  VF acc[J][R];
  for (int j = 0; j < J; ++j)
    for (int r = 0; r < R; ++r) acc[j][r] = hn::Zero(d);
  ForEachVector(in, [&](std::int64_t k, std::int64_t count) {
    VF xv[R];
    for (int r = 0; r < R; ++r) xv[r] = Load(x + r * in + k, count);
    for (int j = 0; j < J; ++j) {
      const VF wv = Load(w + j * in + k, count);
      for (int r = 0; r < R; ++r) acc[j][r] = hn::MulAdd(wv, xv[r], acc[j][r]);
    }
  });
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      const float dot = hn::GetLane(hn::SumOfLanes(d, acc[j][r]));
      float& out = y[r * ldy + j];
      out = accumulate ? out + dot : dot;
    }
}

// The J W rows at w against all `rows` x rows, R at a time (the block of W is re-read from
// cache, not memory, for the second and later R).
template <int J>
HWY_INLINE void Block(std::int64_t rows, std::int64_t in, const float* x, const float* w, float* y,
                      std::int64_t ldy, bool accumulate) {
  std::int64_t r = 0;
  for (; r + kXRows <= rows; r += kXRows)
    Tile<J, kXRows>(in, x + r * in, w, y + r * ldy, ldy, accumulate);
  for (; r < rows; ++r) Tile<J, 1>(in, x + r * in, w, y + r * ldy, ldy, accumulate);
}

// Output columns [j0, j1) of y, i.e. W rows [j0, j1).
void Columns(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t in, std::int64_t out,
             const float* x, const float* W, float* y, bool accumulate) {
  std::int64_t j = j0;
  for (; j + kWRows <= j1; j += kWRows)
    Block<kWRows>(rows, in, x, W + j * in, y + j, out, accumulate);
  for (; j < j1; ++j) Block<1>(rows, in, x, W + j * in, y + j, out, accumulate);
}

}  // namespace origami::kernels::gemv_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace gemv_simd {
HWY_EXPORT(Columns);
}  // namespace gemv_simd

void linear_forward_skinny(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                           const float* W, float* y, bool accumulate) {
  // Dry run: charged as the GEMM it replaces (reading W once is what it costs).
  if (dryrun::skip_kernel(gemm_flops(rows, out, in), static_cast<double>(rows * in + in * out)))
    return;
  ORIGAMI_CHECK(rows >= 0 && in >= 0 && out >= 0,
                "linear_forward_skinny: negative size rows={} in={} out={}", rows, in, out);
  ORIGAMI_CHECK(rows <= kSkinnyMaxRows,
                "linear_forward_skinny: {} rows, more than the {} it is for (use linear_forward)",
                rows, kSkinnyMaxRows);
  if (rows == 0 || out == 0) return;
  ORIGAMI_CHECK(y != nullptr && (in == 0 || (x != nullptr && W != nullptr)),
                "linear_forward_skinny: null pointer for rows={} in={} out={}", rows, in, out);
  // Blocks of W rows of about 64 KiB, a multiple of the tile's W rows: fixed whatever the
  // thread count, so the split never changes a result.
  const std::int64_t grain = (detail::rows_per_chunk(in, 16384) + gemv_simd::kWRows - 1) /
                             gemv_simd::kWRows * gemv_simd::kWRows;
  detail::parallel_for(out, grain, [=](std::int64_t j0, std::int64_t j1) {
    HWY_DYNAMIC_DISPATCH(gemv_simd::Columns)(j0, j1, rows, in, out, x, W, y, accumulate);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
