// Skinny linear products for decode (gemv.h) on Highway vectors, compiled for every SIMD target
// and dispatched at run time (kernels/simd.h). A tile is J consecutive rows of W against R rows
// of x: each W vector is loaded once and multiplied into the R accumulators, so W streams from
// memory once per call and the x rows (at most kSkinnyMaxRows of `in` floats) stay in L1/L2.
// Each (W row, x row) pair has one vector accumulator over the whole row, whatever J and R are,
// so every y element is summed in the same order by every tile shape and thread count.
// One body for fp32 and bf16 weights (WT = float or the uint16_t bits of bf16, LoadAs in
// bf16_vec-inl.h): a bf16 W vector is widened to fp32 exactly and multiplied in fp32, so a
// bf16 product equals the fp32 product of the bf16-rounded weights and reads half the bytes.
// Not ReorderWidenMulAccumulate (AVX-512 BF16's dot product): it takes both operands in bf16,
// which would round the activations too; decode is bound by the weights' bytes, not by the FMAs.
#include "origami/kernels/gemv.h"

#include <algorithm>
#include <vector>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/gemv.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"
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
template <int J, int R, class WT>
HWY_INLINE void Tile(std::int64_t in, const float* HWY_RESTRICT x, const WT* HWY_RESTRICT w,
                     float* y, std::int64_t ldy, bool accumulate) {
  const DF d;
  VF acc[J][R];
  for (int j = 0; j < J; ++j)
    for (int r = 0; r < R; ++r) acc[j][r] = hn::Zero(d);
  ForEachVector(in, [&](std::int64_t k, std::int64_t count) {
    VF xv[R];
    for (int r = 0; r < R; ++r) xv[r] = Load(x + r * in + k, count);
    for (int j = 0; j < J; ++j) {
      const VF wv = LoadAs(w + j * in + k, count);
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
template <int J, class WT>
HWY_INLINE void Block(std::int64_t rows, std::int64_t in, const float* x, const WT* w, float* y,
                      std::int64_t ldy, bool accumulate) {
  std::int64_t r = 0;
  for (; r + kXRows <= rows; r += kXRows)
    Tile<J, kXRows>(in, x + r * in, w, y + r * ldy, ldy, accumulate);
  for (; r < rows; ++r) Tile<J, 1>(in, x + r * in, w, y + r * ldy, ldy, accumulate);
}

// Output columns [j0, j1) of y, i.e. W rows [j0, j1).
template <class WT>
HWY_INLINE void ColumnsOf(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t in,
                          std::int64_t out, const float* x, const WT* W, float* y,
                          bool accumulate) {
  std::int64_t j = j0;
  for (; j + kWRows <= j1; j += kWRows)
    Block<kWRows>(rows, in, x, W + j * in, y + j, out, accumulate);
  for (; j < j1; ++j) Block<1>(rows, in, x, W + j * in, y + j, out, accumulate);
}
void Columns(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t in, std::int64_t out,
             const float* x, const float* W, float* y, bool accumulate) {
  ColumnsOf(j0, j1, rows, in, out, x, W, y, accumulate);
}
// J bf16 W rows widened into `wide` (J * in floats, exact).
template <int J>
HWY_INLINE void WidenRows(std::int64_t in, const std::uint16_t* w, float* wide) {
  ForEachVector(J * in, [&](std::int64_t k, std::int64_t count) {
    Store(LoadBf16(w + k, count), wide + k, count);
  });
}

// With more x rows than one tile takes, a block of W is read once per kXRows of them: widened
// once into a per-thread fp32 copy (J rows, in L1/L2) and run through the fp32 tiles, rather
// than widened again for every tile, which made a batch of 16 slower in bf16 than in fp32. The
// values and the order are the same either way, so the results are too.
void ColumnsBf16(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t in,
                 std::int64_t out, const float* x, const std::uint16_t* W, float* y,
                 bool accumulate) {
  if (rows <= kXRows) return ColumnsOf(j0, j1, rows, in, out, x, W, y, accumulate);
  thread_local std::vector<float> wide;  // grows to kWRows * in once per thread
  if (wide.size() < static_cast<std::size_t>(kWRows * in))
    wide.resize(static_cast<std::size_t>(kWRows * in));
  std::int64_t j = j0;
  for (; j + kWRows <= j1; j += kWRows) {
    WidenRows<kWRows>(in, W + j * in, wide.data());
    Block<kWRows>(rows, in, x, wide.data(), y + j, out, accumulate);
  }
  for (; j < j1; ++j) {
    WidenRows<1>(in, W + j * in, wide.data());
    Block<1>(rows, in, x, wide.data(), y + j, out, accumulate);
  }
}

}  // namespace origami::kernels::gemv_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace gemv_simd {
HWY_EXPORT(Columns);
HWY_EXPORT(ColumnsBf16);

// The checks of both products; false when there is nothing to compute. The dry run charges
// each as the GEMM it replaces, reading W once (elements; the profile gives their size).
bool check_skinny(const char* name, std::int64_t rows, std::int64_t in, std::int64_t out,
                  const void* x, const void* W, const float* y) {
  if (dryrun::skip_kernel(gemm_flops(rows, out, in), static_cast<double>(rows * in + in * out)))
    return false;
  ORIGAMI_CHECK(rows >= 0 && in >= 0 && out >= 0, "{}: negative size rows={} in={} out={}", name,
                rows, in, out);
  ORIGAMI_CHECK(rows <= kSkinnyMaxRows,
                "{}: {} rows, more than the {} it is for (use linear_forward)", name, rows,
                kSkinnyMaxRows);
  if (rows == 0 || out == 0) return false;
  ORIGAMI_CHECK(y != nullptr && (in == 0 || (x != nullptr && W != nullptr)),
                "{}: null pointer for rows={} in={} out={}", name, rows, in, out);
  return true;
}

// Blocks of W rows of about 64 KiB of fp32 (32 KiB of bf16), a multiple of the tile's W rows:
// fixed whatever the thread count, so the split never changes a result.
std::int64_t skinny_grain(std::int64_t in) {
  return (detail::rows_per_chunk(in, 16384) + kWRows - 1) / kWRows * kWRows;
}
}  // namespace gemv_simd

void linear_forward_skinny(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                           const float* W, float* y, bool accumulate) {
  if (!gemv_simd::check_skinny("linear_forward_skinny", rows, in, out, x, W, y)) return;
  detail::parallel_for(out, gemv_simd::skinny_grain(in), [=](std::int64_t j0, std::int64_t j1) {
    HWY_DYNAMIC_DISPATCH(gemv_simd::Columns)(j0, j1, rows, in, out, x, W, y, accumulate);
  });
}

void linear_forward_skinny_bf16(std::int64_t rows, std::int64_t in, std::int64_t out,
                                const float* x, const bf16* W, float* y, bool accumulate) {
  if (!gemv_simd::check_skinny("linear_forward_skinny_bf16", rows, in, out, x, W, y)) return;
  const std::uint16_t* bits = bf16_bits(W);
  detail::parallel_for(out, gemv_simd::skinny_grain(in), [=](std::int64_t j0, std::int64_t j1) {
    HWY_DYNAMIC_DISPATCH(gemv_simd::ColumnsBf16)(j0, j1, rows, in, out, x, bits, y, accumulate);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
