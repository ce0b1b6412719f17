// Private to the attention kernels: the fast exp2, the register-blocked tile product and the
// masked score tile, written once over Highway's portable vectors and compiled for every SIMD
// target by the files that include it (attention.cpp, attention_backward.cpp, which go through
// hwy/foreach_target.h). The vector width and the register blocking come from the target.
//
// Per-target include guard (Highway's convention for "-inl.h" headers): the body is compiled
// once per target, inside that target's namespace.
#if defined(ORIGAMI_KERNELS_ATTENTION_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORIGAMI_KERNELS_ATTENTION_SIMD_INL_H_
#undef ORIGAMI_KERNELS_ATTENTION_SIMD_INL_H_
#else
#define ORIGAMI_KERNELS_ATTENTION_SIMD_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <hwy/highway.h>

#include "origami/kernels/attention_tiles.h"
#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::attn::HWY_NAMESPACE {

using namespace vec::HWY_NAMESPACE;  // DF, VF, kFloatLanes, hn
using DI = hn::RebindToSigned<DF>;

// Tiles are padded to kTilePad floats, whole vectors on every target.
static_assert(kTilePad % kFloatLanes == 0, "tile padding must be whole vectors on every target");

// Vector registers of the target: 32 with AVX-512, 16 with AVX2 and SSE4.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kRegisters = 32;
#else
constexpr int kRegisters = 16;
#endif

inline VF load(const float* p) { return hn::LoadU(DF(), p); }
inline void store(float* p, VF v) { hn::StoreU(v, DF(), p); }
inline VF splat(float x) { return hn::Set(DF(), x); }
inline float hsum(VF v) { return hn::GetLane(hn::SumOfLanes(DF(), v)); }

// 2^x for x <= ~126, relative error below 3e-7 (about 2 ulp); exactly 0 for x < -126, which
// includes -inf (masked scores), so no masked entry ever leaks a denormal or a NaN; NaN stays NaN.
// 2^x = 2^n * 2^f with n = round(x), f in [-1/2, 1/2]; 2^f by its Taylor polynomial of degree 7
// (truncation error 6e-9 at |f| = 1/2).
inline VF exp2_approx(VF x) {
  const DF d;
  const DI di;
  const VF lo = hn::Set(d, -126.0f), hi = hn::Set(d, 126.0f);
  // Selects rather than Min/Max: x86's min/max return the second operand for NaN, and a NaN
  // must come through.
  const auto below = hn::Lt(x, lo);
  VF xc = hn::IfThenElse(below, lo, x);
  xc = hn::IfThenElse(hn::Gt(xc, hi), hi, xc);
  // Adding 1.5 * 2^23 rounds to the nearest integer, which then sits in the low mantissa bits.
  const VF shifter = hn::Set(d, 12582912.0f);
  const VF t = hn::Add(xc, shifter);
  const VF n = hn::Sub(t, shifter);
  const VF f = hn::Sub(xc, n);
  VF p = hn::Set(d, 1.5252733804059840e-05f);
  p = hn::MulAdd(p, f, hn::Set(d, 1.5403530393381606e-04f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.3333558146428443e-03f));
  p = hn::MulAdd(p, f, hn::Set(d, 9.6181291076284772e-03f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.5504108664821580e-02f));
  p = hn::MulAdd(p, f, hn::Set(d, 2.4022650695910071e-01f));
  p = hn::MulAdd(p, f, hn::Set(d, 6.9314718055994531e-01f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  const auto exponent = hn::ShiftLeft<23>(hn::Sub(hn::BitCast(di, t), hn::BitCast(di, shifter)));
  const VF r = hn::BitCast(d, hn::Add(hn::BitCast(di, p), exponent));
  return hn::IfThenZeroElse(below, r);
}

// How a tile product treats the existing C.
enum class Init { Zero, Accumulate, ScaleRows };

// The parts of a tile product that are known to be zero or not needed, when masked pairs lie
// in a corner of the tile (a diagonal tile: each row group of the register blocking then
// only computes what its rows can see). Null: no trimming.
struct TileTrim {
  // Per row r of C: only k in [k_begin[r], k_end[r]) contribute (the other terms are exactly
  // zero); a group of rows runs over the union of its rows' ranges.
  const std::int64_t* k_begin = nullptr;
  const std::int64_t* k_end = nullptr;
  // Per vector v of columns of C (columns [v * kFloatLanes, (v + 1) * kFloatLanes)): only its
  // first rows_of_vector[v] rows are needed; the later ones may be left unwritten.
  const std::int64_t* rows_of_vector = nullptr;
};

// C[r, 0 : NV vectors) (=|+=|= row_scale[r] * C +) sum_k A(r, k) * B[k, 0 : NV vectors) for
// r < MR, where A(r, k) = A[r * a_rs + k * a_ks] (so either A or A^T can be used) and B rows
// are ldb apart. The MR x NV accumulators stay in registers over the whole k loop.
template <int MR, int NV>
HWY_INLINE void micro_kernel(std::int64_t K, const float* A, std::int64_t a_rs, std::int64_t a_ks,
                             const float* B, std::int64_t ldb, float* C, std::int64_t ldc,
                             Init init, const float* row_scale) {
  const DF d;
  VF acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (init == Init::Zero) {
        acc[r][v] = hn::Zero(d);
      } else {
        acc[r][v] = load(C + r * ldc + v * kFloatLanes);
        if (init == Init::ScaleRows) acc[r][v] = hn::Mul(acc[r][v], hn::Set(d, row_scale[r]));
      }
    }
  }
  const float* a_row[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) a_row[r] = A + r * a_rs;
  for (std::int64_t k = 0; k < K; ++k) {
    VF b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = load(B + k * ldb + v * kFloatLanes);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const VF a = hn::Set(d, a_row[r][k * a_ks]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(a, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store(C + r * ldc + v * kFloatLanes, acc[r][v]);
  }
}

// The last rows < MR of a block: picks the instantiation with exactly that many rows.
template <int R, int NV>
HWY_INLINE void micro_kernel_rows(int rows, std::int64_t K, const float* A, std::int64_t a_rs,
                                  std::int64_t a_ks, const float* B, std::int64_t ldb, float* C,
                                  std::int64_t ldc, Init init, const float* row_scale) {
  if constexpr (R > 0) {
    if (rows == R) {
      micro_kernel<R, NV>(K, A, a_rs, a_ks, B, ldb, C, ldc, init, row_scale);
    } else {
      micro_kernel_rows<R - 1, NV>(rows, K, A, a_rs, a_ks, B, ldb, C, ldc, init, row_scale);
    }
  }
}

template <int MR, int NV>
HWY_INLINE void tile_product_columns(std::int64_t rows, std::int64_t K, const float* A,
                                     std::int64_t a_rs, std::int64_t a_ks, const float* B,
                                     std::int64_t ldb, float* C, std::int64_t ldc, Init init,
                                     const float* row_scale) {
  std::int64_t r = 0;
  for (; r + MR <= rows; r += MR) {
    micro_kernel<MR, NV>(K, A + r * a_rs, a_rs, a_ks, B, ldb, C + r * ldc, ldc, init,
                         row_scale == nullptr ? nullptr : row_scale + r);
  }
  if (r < rows) {
    micro_kernel_rows<MR - 1, NV>(static_cast<int>(rows - r), K, A + r * a_rs, a_rs, a_ks, B, ldb,
                                  C + r * ldc, ldc, init,
                                  row_scale == nullptr ? nullptr : row_scale + r);
  }
}

// C[rows, cols] (init) A(rows, K) * B[K, cols], cols a multiple of kTilePad (tiles are padded).
// Register blocks of about 3/4 of the target's vector registers in accumulators, the rest for
// the B row and the broadcast A element: with 32 registers, 4 vectors x 6 rows, then 2 x 12 and
// 1 x 12; with 16, 2 vectors x 6 rows, then 1 x 12.
inline void tile_product(std::int64_t rows, std::int64_t cols, std::int64_t K, const float* A,
                         std::int64_t a_rs, std::int64_t a_ks, const float* B, std::int64_t ldb,
                         float* C, std::int64_t ldc, Init init, const float* row_scale = nullptr) {
  std::int64_t c = 0;
  if constexpr (kRegisters >= 32) {
    for (; c + 4 * kFloatLanes <= cols; c += 4 * kFloatLanes) {
      tile_product_columns<6, 4>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
    }
    if (c + 2 * kFloatLanes <= cols) {
      tile_product_columns<12, 2>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
      c += 2 * kFloatLanes;
    }
  } else {
    for (; c + 2 * kFloatLanes <= cols; c += 2 * kFloatLanes) {
      tile_product_columns<6, 2>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
    }
  }
  for (; c < cols; c += kFloatLanes) {
    tile_product_columns<12, 1>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
  }
}

// The k range rows [r, r + count) of a trimmed product need: the union of theirs.
inline void trimmed_k_range(const TileTrim& trim, std::int64_t r, std::int64_t count,
                            std::int64_t K, std::int64_t& k0, std::int64_t& k1) {
  k0 = 0;
  k1 = K;
  if (trim.k_begin != nullptr) k0 = *std::min_element(trim.k_begin + r, trim.k_begin + r + count);
  if (trim.k_end != nullptr) k1 = *std::max_element(trim.k_end + r, trim.k_end + r + count);
}

// tile_product_columns under a trim: each row group's k loop runs over its k0..k1 only (A and
// B move to k0).
template <int MR, int NV>
HWY_INLINE void trimmed_product_columns(std::int64_t rows, std::int64_t K, const float* A,
                                        std::int64_t a_rs, std::int64_t a_ks, const float* B,
                                        std::int64_t ldb, float* C, std::int64_t ldc, Init init,
                                        const float* row_scale, const TileTrim& trim) {
  if (trim.rows_of_vector != nullptr) {
    rows = std::min(rows, *std::max_element(trim.rows_of_vector, trim.rows_of_vector + NV));
  }
  std::int64_t r = 0, k0 = 0, k1 = K;
  for (; r + MR <= rows; r += MR) {
    trimmed_k_range(trim, r, MR, K, k0, k1);
    micro_kernel<MR, NV>(std::max<std::int64_t>(0, k1 - k0), A + r * a_rs + k0 * a_ks, a_rs, a_ks,
                         B + k0 * ldb, ldb, C + r * ldc, ldc, init,
                         row_scale == nullptr ? nullptr : row_scale + r);
  }
  if (r < rows) {
    trimmed_k_range(trim, r, rows - r, K, k0, k1);
    micro_kernel_rows<MR - 1, NV>(static_cast<int>(rows - r), std::max<std::int64_t>(0, k1 - k0),
                                  A + r * a_rs + k0 * a_ks, a_rs, a_ks, B + k0 * ldb, ldb,
                                  C + r * ldc, ldc, init,
                                  row_scale == nullptr ? nullptr : row_scale + r);
  }
}

// tile_product for tiles with masked corners (trim: what may be left out). A function of its
// own, so that the untrimmed product's code stays as it was (with both in one, the 16K
// forward and backward, which trim almost nothing, ran 3-9% slower on AVX-512).
inline HWY_NOINLINE void tile_product_trimmed(std::int64_t rows, std::int64_t cols,
                                              std::int64_t K, const float* A, std::int64_t a_rs,
                                              std::int64_t a_ks, const float* B, std::int64_t ldb,
                                              float* C, std::int64_t ldc, Init init,
                                              const float* row_scale, TileTrim trim) {
  if (trim.k_begin == nullptr && trim.k_end == nullptr && trim.rows_of_vector == nullptr) {
    tile_product(rows, cols, K, A, a_rs, a_ks, B, ldb, C, ldc, init, row_scale);
    return;
  }
  std::int64_t c = 0;
  auto columns = [&](auto mr, auto nv) {
    constexpr int MR = decltype(mr)::value, NV = decltype(nv)::value;
    TileTrim at = trim;
    if (at.rows_of_vector != nullptr) at.rows_of_vector += c / kFloatLanes;
    trimmed_product_columns<MR, NV>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init,
                                    row_scale, at);
    c += NV * kFloatLanes;
  };
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  using I6 = std::integral_constant<int, 6>;
  using I12 = std::integral_constant<int, 12>;
  if constexpr (kRegisters >= 32) {
    while (c + 4 * kFloatLanes <= cols) columns(I6{}, I4{});
    if (c + 2 * kFloatLanes <= cols) columns(I12{}, I2{});
  } else {
    while (c + 2 * kFloatLanes <= cols) columns(I6{}, I2{});
  }
  while (c < cols) columns(I12{}, I1{});
}

// scores[rows, np] = (scaled q) k^T for one tile pair, with invisible pairs and the padding
// columns set to -inf. Unless every pair is visible, row r is masked element-wise over keys
// [mask_from, mask_end[r]) only: the caller knows the earlier keys visible to every row and
// does not read the later ones.
inline void tile_scores(const Geometry& G, const QueryBlock& blk, const KeyTile& t, const float* q,
                        const float* kt, std::int64_t ld_kt, const std::int64_t* qpos,
                        const std::int32_t* qdoc, const std::int64_t* kpos, std::int64_t mask_from,
                        const std::int64_t* mask_end, float* scores) {
  tile_product(blk.rows, t.np, G.s.head_dim, q, G.dp, 1, kt, ld_kt, scores, t.np, Init::Zero);
  const bool mask = !all_visible(blk, t);
  for (std::int64_t r = 0; r < blk.rows; ++r) {
    float* row = scores + r * t.np;
    if (mask) {
      const std::int64_t p = qpos[r];
      const std::int32_t doc = qdoc[r];
      for (std::int64_t j = mask_from; j < mask_end[r]; ++j)
        row[j] = masked(t, kpos, j, p, doc) ? kNegInf : row[j];
    }
    std::fill(row + t.n, row + t.np, kNegInf);
  }
}

}  // namespace origami::kernels::attn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
