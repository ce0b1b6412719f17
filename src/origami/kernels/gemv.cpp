// Skinny linear products for decode (gemv.h) on Highway vectors, compiled for every SIMD target
// and dispatched at run time (kernels/simd.h). A tile is one row of W against R rows of x: the
// W row streams from memory once per call (the second and later R re-read it from L1), and each
// (W row, x row) pair has kUnroll vector accumulators over interleaved vectors of the row,
// whatever R is, so every y element is summed in the same order by every tile shape and thread
// count. One W row at a time, not several side by side (measured on this Zen 5, decode_bench's
// step_products, 1 row, 1 thread, cache-line-aligned weights, thread CPU time, loaded machine,
// three alternating runs: bf16 8.7-10.1 ms with one W row, 15.8-16.7 with four side by side;
// fp32 13.2-14.9 and 16.4-19.5; docs/inference.md has the rest): one stream per core, which
// is likely what this CPU's prefetcher follows best.
// One body for fp32 and bf16 weights (WT = float or the uint16_t bits of bf16, LoadAs in
// bf16_vec-inl.h): a bf16 W vector is widened to fp32 exactly and multiplied in fp32, so a
// bf16 product equals the fp32 product of the bf16-rounded weights and reads half the bytes.
// Not AVX512_BF16's vdpbf16ps: it takes both operands in bf16, so the activations would be
// rounded to bf16 (or split in two bf16 terms, doubling the products), and measured on this
// Zen 5 it multiplied fewer weights per second than the widening does (docs/inference.md).
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
// Vector accumulators per (W row, x row) pair: independent chains that hide the latency of an
// FMA when a tile has a single x row.
constexpr int kUnroll = 4;
}  // namespace origami::kernels::gemv_simd
#endif

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::gemv_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// x rows per tile: kUnroll * R accumulators and one W vector in registers, x read from L1 as a
// memory operand (17 of AVX-512's 32 registers with R = 4, 9 of AVX2's and SSE's 16 with R = 2).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kXRows = 4;
#else
constexpr int kXRows = 2;
#endif

// y[r*ldy] (=|+=) dot(x row r, the W row at w) for R x rows from x.
template <int R, class WT>
HWY_INLINE void Tile(std::int64_t in, const float* HWY_RESTRICT x, const WT* HWY_RESTRICT w,
                     float* y, std::int64_t ldy, bool accumulate) {
  const DF d;
  constexpr std::int64_t N = kFloatLanes;
  VF acc[R][kUnroll];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < kUnroll; ++u) acc[r][u] = hn::Zero(d);
  std::int64_t k = 0;
  for (; k + kUnroll * N <= in; k += kUnroll * N)
    for (int u = 0; u < kUnroll; ++u) {
      const VF wv = LoadAs(w + k + u * N, N);
      for (int r = 0; r < R; ++r)
        acc[r][u] = hn::MulAdd(wv, hn::LoadU(d, x + r * in + k + u * N), acc[r][u]);
    }
  // The last whole vectors and the partial one, into the first accumulator.
  for (; k < in; k += N) {
    const std::int64_t count = std::min(N, in - k);
    const VF wv = LoadAs(w + k, count);
    for (int r = 0; r < R; ++r) acc[r][0] = hn::MulAdd(wv, Load(x + r * in + k, count), acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    const VF sum = hn::Add(hn::Add(acc[r][0], acc[r][1]), hn::Add(acc[r][2], acc[r][3]));
    const float dot = hn::GetLane(hn::SumOfLanes(d, sum));
    float& out = y[r * ldy];
    out = accumulate ? out + dot : dot;
  }
}

// The W row at w against all `rows` x rows, R at a time; y is column j of y.
template <class WT>
HWY_INLINE void Row(std::int64_t rows, std::int64_t in, const float* x, const WT* w, float* y,
                    std::int64_t ldy, bool accumulate) {
  std::int64_t r = 0;
  for (; r + kXRows <= rows; r += kXRows)
    Tile<kXRows>(in, x + r * in, w, y + r * ldy, ldy, accumulate);
  for (; r < rows; ++r) Tile<1>(in, x + r * in, w, y + r * ldy, ldy, accumulate);
}

// Output columns [j0, j1) of y, i.e. W rows [j0, j1).
void Columns(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t in, std::int64_t out,
             const float* x, const float* W, float* y, bool accumulate) {
  for (std::int64_t j = j0; j < j1; ++j) Row(rows, in, x, W + j * in, y + j, out, accumulate);
}

// bf16 W rows [j0, j1), widened. With more x rows than one tile takes, a W row is widened
// once into a per-thread fp32 copy (in L1) and run through the fp32 tiles, rather than widened
// again for every tile, which made a batch of 16 slower in bf16 than in fp32. The values and
// the order are the same either way, so the results are too.
void ColumnsBf16(std::int64_t j0, std::int64_t j1, std::int64_t rows, std::int64_t in,
                 std::int64_t out, const float* x, const std::uint16_t* W, float* y,
                 bool accumulate) {
  if (rows <= kXRows) {
    for (std::int64_t j = j0; j < j1; ++j) Row(rows, in, x, W + j * in, y + j, out, accumulate);
    return;
  }
  thread_local std::vector<float> wide;  // grows to `in` once per thread
  if (wide.size() < static_cast<std::size_t>(in)) wide.resize(static_cast<std::size_t>(in));
  for (std::int64_t j = j0; j < j1; ++j) {
    ForEachVector(in, [&](std::int64_t k, std::int64_t count) {
      Store(LoadBf16(W + j * in + k, count), wide.data() + k, count);
    });
    Row(rows, in, x, wide.data(), y + j, out, accumulate);
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

// Blocks of W rows of about 64 KiB of fp32 (32 KiB of bf16); each thread takes consecutive
// blocks (one stream). Every W row is summed alone, so the split never changes a result.
std::int64_t skinny_grain(std::int64_t in) {
  return detail::rows_per_chunk(in, 16384);
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
