// Rotary position embedding on global positions: the rotation on Highway vectors, compiled for
// every SIMD target and dispatched at run time (kernels/simd.h); the tables in float64. One
// body serves fp32 and bf16 rows (bf16_vec-inl.h's LoadAs/StoreAs).
#include "origami/kernels/rope.h"

#include <cmath>
#include <numbers>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/rope.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::rope_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// Rotates every head of the rows [r0, r1) ((batch, position) rows of heads * head_dim) by the
// row's angle. `sign` = +1 is the forward rotation, -1 its transpose. Pairs are (i, i + d/2),
// as HF's rotate_half:
//   out_i = x_i cos - x_{i+d/2} sin,   out_{i+d/2} = x_{i+d/2} cos + x_i sin.
// T: float, or bf16 bits (widened on load, each rotated element rounded once; fp32 tables).
template <class T>
void RotateRowsOf(std::int64_t r0, std::int64_t r1, std::int64_t seq, std::int64_t heads,
                  std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                  const float* sin_table, float sign, T* x) {
  const std::int64_t half = head_dim / 2;
  const std::int64_t row_len = heads * head_dim;
  const VF signv = hn::Set(DF(), sign);
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t p = pos[r % seq];
    const float* c = cos_table + p * half;
    const float* s = sin_table + p * half;
    for (std::int64_t hd = 0; hd < heads; ++hd) {
      T* x1 = x + r * row_len + hd * head_dim;
      T* x2 = x1 + half;
      ForEachVector(half, [&](std::int64_t i, std::int64_t count) {
        const VF a = LoadAs(x1 + i, count), b = LoadAs(x2 + i, count), ci = Load(c + i, count);
        const VF si = hn::Mul(signv, Load(s + i, count));
        StoreAs(hn::NegMulAdd(b, si, hn::Mul(a, ci)), x1 + i, count);
        StoreAs(hn::MulAdd(a, si, hn::Mul(b, ci)), x2 + i, count);
      });
    }
  }
}

void RotateRows(std::int64_t r0, std::int64_t r1, std::int64_t seq, std::int64_t heads,
                std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                const float* sin_table, float sign, float* x) {
  RotateRowsOf(r0, r1, seq, heads, head_dim, pos, cos_table, sin_table, sign, x);
}
void RotateRowsBf16(std::int64_t r0, std::int64_t r1, std::int64_t seq, std::int64_t heads,
                    std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                    const float* sin_table, float sign, std::uint16_t* x) {
  RotateRowsOf(r0, r1, seq, heads, head_dim, pos, cos_table, sin_table, sign, x);
}

}  // namespace origami::kernels::rope_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace rope_simd {
HWY_EXPORT(RotateRows);
HWY_EXPORT(RotateRowsBf16);
}  // namespace rope_simd

namespace {

void check_args(const char* what, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                std::int64_t head_dim, const std::int64_t* pos) {
  ORIGAMI_CHECK(batch >= 0 && seq >= 0 && heads >= 0 && head_dim >= 0,
                "{}: negative size batch={} seq={} heads={} head_dim={}", what, batch, seq, heads,
                head_dim);
  ORIGAMI_CHECK(head_dim % 2 == 0, "{}: head_dim must be even, got {}", what, head_dim);
  for (std::int64_t s = 0; s < seq; ++s)
    ORIGAMI_CHECK(pos[s] >= 0, "{}: position {} at index {} is negative", what, pos[s], s);
}

void rotate(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
            const std::int64_t* pos, const float* cos_table, const float* sin_table, float sign,
            float* x) {
  detail::parallel_for(batch * seq, detail::rows_per_chunk(heads * head_dim),
                       [=](std::int64_t r0, std::int64_t r1) {
    HWY_DYNAMIC_DISPATCH(rope_simd::RotateRows)(r0, r1, seq, heads, head_dim, pos, cos_table,
                                                sin_table, sign, x);
  });
}

void rotate(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
            const std::int64_t* pos, const float* cos_table, const float* sin_table, float sign,
            bf16* x) {
  std::uint16_t* xb = bf16_bits(x);
  detail::parallel_for(batch * seq, detail::rows_per_chunk(heads * head_dim),
                       [=](std::int64_t r0, std::int64_t r1) {
    HWY_DYNAMIC_DISPATCH(rope_simd::RotateRowsBf16)(r0, r1, seq, heads, head_dim, pos,
                                                    cos_table, sin_table, sign, xb);
  });
}

}  // namespace

std::vector<double> rope_inverse_frequencies(std::int64_t head_dim, double theta,
                                             const RopeScaling& scaling) {
  ORIGAMI_CHECK(head_dim >= 0 && head_dim % 2 == 0,
                "rope_inverse_frequencies: head_dim must be even and >= 0, got {}", head_dim);
  ORIGAMI_CHECK(theta > 0.0, "rope_inverse_frequencies: theta must be > 0, got {}", theta);
  ORIGAMI_CHECK(scaling.factor > 0.0, "rope_inverse_frequencies: factor must be > 0, got {}",
                scaling.factor);
  std::vector<double> f(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  if (scaling.type == RopeScaling::Type::Linear)
    for (double& x : f) x /= scaling.factor;
  if (scaling.type == RopeScaling::Type::Llama3) {
    const double L = scaling.original_max_position_embeddings;
    const double lo = scaling.low_freq_factor, hi = scaling.high_freq_factor;
    ORIGAMI_CHECK(hi > lo,
                  "rope_inverse_frequencies: high_freq_factor {} must exceed "
                  "low_freq_factor {}",
                  hi, lo);
    const double low_freq_wavelen = L / lo, high_freq_wavelen = L / hi;
    for (double& x : f) {
      const double wavelen = 2.0 * std::numbers::pi / x;
      if (wavelen > low_freq_wavelen) {
        x /= scaling.factor;
      } else if (!(wavelen < high_freq_wavelen)) {  // the medium band: interpolated
        const double s = (L / wavelen - lo) / (hi - lo);
        x = (1.0 - s) * x / scaling.factor + s * x;
      }
    }
  }
  return f;
}

void rope_table(std::int64_t max_pos, std::int64_t head_dim, double theta,
                const RopeScaling& scaling, float* cos_table, float* sin_table) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(max_pos >= 0, "rope_table: negative max_pos {}", max_pos);
  ORIGAMI_CHECK(head_dim >= 0 && head_dim % 2 == 0,
                "rope_table: head_dim must be even and >= 0, got {}", head_dim);
  ORIGAMI_CHECK(theta > 0.0, "rope_table: theta must be > 0, got {}", theta);
  const std::vector<double> inv_freq = rope_inverse_frequencies(head_dim, theta, scaling);
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    for (std::int64_t p = 0; p < max_pos; ++p) {
      const double angle = static_cast<double>(p) * inv_freq[static_cast<std::size_t>(i)];
      cos_table[p * half + i] = static_cast<float>(std::cos(angle));
      sin_table[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope_table(std::int64_t max_pos, std::int64_t head_dim, double theta, float* cos_table,
                float* sin_table) {
  rope_table(max_pos, head_dim, theta, RopeScaling{}, cos_table, sin_table);
}

void rope_forward(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                  const std::int64_t* pos, const float* cos_table, const float* sin_table,
                  float* x) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_args("rope_forward", batch, seq, heads, head_dim, pos);
  rotate(batch, seq, heads, head_dim, pos, cos_table, sin_table, 1.0f, x);
}

void rope_backward(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                   const std::int64_t* pos, const float* cos_table, const float* sin_table,
                   float* dx) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_args("rope_backward", batch, seq, heads, head_dim, pos);
  rotate(batch, seq, heads, head_dim, pos, cos_table, sin_table, -1.0f, dx);
}

void rope_forward_bf16(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                       const float* sin_table, bf16* x) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_args("rope_forward_bf16", batch, seq, heads, head_dim, pos);
  rotate(batch, seq, heads, head_dim, pos, cos_table, sin_table, 1.0f, x);
}

void rope_backward_bf16(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                        std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                        const float* sin_table, bf16* dx) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_args("rope_backward_bf16", batch, seq, heads, head_dim, pos);
  rotate(batch, seq, heads, head_dim, pos, cos_table, sin_table, -1.0f, dx);
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
