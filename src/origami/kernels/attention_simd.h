// Private to attention.cpp: the vector type, a fast exp2 and the register-blocked tile product
// the flash-attention kernels are built from. Written with GCC vector extensions rather than
// intrinsics so that one code path serves the AVX-512 Release build and the sanitizer build
// (which has no -march=native: the compiler then lowers each 16-lane vector to narrower ones).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

// Without AVX-512 (the sanitizer build), GCC warns at every call passing a 64-byte vector that
// the ABI differs from an AVX-512 build. These helpers are inline and private to the attention
// kernel (and its test), never an interface between separately built objects, so the warning
// does not apply; it is switched off for the files that include this header.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace origami::kernels::attn {

constexpr int kLanes = 16;
typedef float VFloat __attribute__((vector_size(64)));
typedef std::int32_t VInt __attribute__((vector_size(64)));

inline std::int64_t round_up_lanes(std::int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

inline VFloat load(const float* p) {
  VFloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, VFloat v) {
  std::memcpy(p, &v, sizeof v);
}
inline VFloat splat(float x) {
  return VFloat{} + x;
}
// Bit reinterpretations (a cast between vector types of one size keeps the bits).
inline VInt as_int(VFloat v) {
  return (VInt)v;
}
inline VFloat as_float(VInt v) {
  return (VFloat)v;
}
inline VFloat vmax(VFloat a, VFloat b) {
  return a > b ? a : b;
}

inline float hmax(VFloat v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
inline float hsum(VFloat v) {
  float s = 0.0f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// 2^x for x <= ~126, relative error below 3e-7 (about 2 ulp); exactly 0 for x < -126, which
// includes -inf (masked scores), so no masked entry ever leaks a denormal or a NaN.
// 2^x = 2^n * 2^f with n = round(x), f in [-1/2, 1/2]; 2^f by its Taylor polynomial of degree 7
// (truncation error 6e-9 at |f| = 1/2).
inline VFloat exp2_approx(VFloat x) {
  const VFloat lo = splat(-126.0f);
  const VFloat hi = splat(126.0f);
  VFloat xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  // Adding 1.5 * 2^23 rounds to the nearest integer, which then sits in the low mantissa bits.
  const VFloat shifter = splat(12582912.0f);
  const VFloat t = xc + shifter;
  const VFloat n = t - shifter;
  const VFloat f = xc - n;
  VFloat p = splat(1.5252733804059840e-05f);
  p = p * f + 1.5403530393381606e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  const VInt exponent = (as_int(t) - as_int(shifter)) << 23;
  const VFloat r = as_float(as_int(p) + exponent);
  return x < lo ? VFloat{} : r;
}

// How a tile product treats the existing C.
enum class Init { Zero, Accumulate, ScaleRows };

// C[r, 0 : 16*NV) (=|+=|= row_scale[r] * C +) sum_k A(r, k) * B[k, 0 : 16*NV) for r < MR,
// where A(r, k) = A[r * a_rs + k * a_ks] (so either A or A^T can be used) and B rows are
// ldb apart. The MR x NV accumulators stay in registers over the whole k loop.
template <int MR, int NV>
inline void micro_kernel(std::int64_t K, const float* A, std::int64_t a_rs, std::int64_t a_ks,
                         const float* B, std::int64_t ldb, float* C, std::int64_t ldc, Init init,
                         const float* row_scale) {
  VFloat acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (init == Init::Zero) {
        acc[r][v] = VFloat{};
      } else {
        acc[r][v] = load(C + r * ldc + v * kLanes);
        if (init == Init::ScaleRows) acc[r][v] *= row_scale[r];
      }
    }
  }
  const float* a_row[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) a_row[r] = A + r * a_rs;
  for (std::int64_t k = 0; k < K; ++k) {
    VFloat b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = load(B + k * ldb + v * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const VFloat a = splat(a_row[r][k * a_ks]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store(C + r * ldc + v * kLanes, acc[r][v]);
  }
}

// The last rows < MR of a block: picks the instantiation with exactly that many rows.
template <int R, int NV>
inline void micro_kernel_rows(int rows, std::int64_t K, const float* A, std::int64_t a_rs,
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
inline void tile_product_columns(std::int64_t rows, std::int64_t K, const float* A,
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

// C[rows, cols] (init) A(rows, K) * B[K, cols], cols a multiple of kLanes (tiles are padded).
// Columns go in chunks of 64 (6 rows per register block), then 32 and 16 (12 rows): about 24
// accumulators either way, out of the 32 vector registers of AVX-512.
inline void tile_product(std::int64_t rows, std::int64_t cols, std::int64_t K, const float* A,
                         std::int64_t a_rs, std::int64_t a_ks, const float* B, std::int64_t ldb,
                         float* C, std::int64_t ldc, Init init, const float* row_scale = nullptr) {
  std::int64_t c = 0;
  for (; c + 4 * kLanes <= cols; c += 4 * kLanes) {
    tile_product_columns<6, 4>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
  }
  if (c + 2 * kLanes <= cols) {
    tile_product_columns<12, 2>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
    c += 2 * kLanes;
  }
  if (c < cols) {
    tile_product_columns<12, 1>(rows, K, A, a_rs, a_ks, B + c, ldb, C + c, ldc, init, row_scale);
  }
}

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace origami::kernels::attn
