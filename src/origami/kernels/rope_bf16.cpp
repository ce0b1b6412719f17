// RoPE on bf16 rows (rope.h): rope.cpp's rotation in fp32 on the widened lanes
// (bf16_vec-inl.h), with the fp32 tables, each rotated element rounded once to bf16.
#include "origami/kernels/rope.h"

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/rope_bf16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::rope_bf16_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// As rope.cpp's RotateRows: sign +1 forward, -1 the transpose; pairs (i, i + d/2).
void RotateRows(std::int64_t r0, std::int64_t r1, std::int64_t seq, std::int64_t heads,
                std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                const float* sin_table, float sign, std::uint16_t* x) {
  const std::int64_t half = head_dim / 2;
  const std::int64_t row_len = heads * head_dim;
  const VF signv = hn::Set(DF(), sign);
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t p = pos[r % seq];
    const float* c = cos_table + p * half;
    const float* s = sin_table + p * half;
    for (std::int64_t hd = 0; hd < heads; ++hd) {
      std::uint16_t* x1 = x + r * row_len + hd * head_dim;
      std::uint16_t* x2 = x1 + half;
      ForEachVector(half, [&](std::int64_t i, std::int64_t count) {
        const VF a = LoadBf16(x1 + i, count), b = LoadBf16(x2 + i, count);
        const VF ci = Load(c + i, count);
        const VF si = hn::Mul(signv, Load(s + i, count));
        StoreBf16(hn::NegMulAdd(b, si, hn::Mul(a, ci)), x1 + i, count);
        StoreBf16(hn::MulAdd(a, si, hn::Mul(b, ci)), x2 + i, count);
      });
    }
  }
}

}  // namespace origami::kernels::rope_bf16_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace rope_bf16_simd {
HWY_EXPORT(RotateRows);
}  // namespace rope_bf16_simd

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
            bf16* x) {
  std::uint16_t* xb = bf16_bits(x);
  detail::parallel_for(batch * seq, detail::rows_per_chunk(heads * head_dim),
                       [=](std::int64_t r0, std::int64_t r1) {
                         HWY_DYNAMIC_DISPATCH(rope_bf16_simd::RotateRows)
                         (r0, r1, seq, heads, head_dim, pos, cos_table, sin_table, sign, xb);
                       });
}

}  // namespace

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
