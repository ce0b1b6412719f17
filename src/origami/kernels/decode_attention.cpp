// One decode step's attention for the whole batch (decode_attention.h) on Highway vectors,
// compiled for every SIMD target and dispatched at run time (kernels/simd.h). A unit of work is
// one (sequence, kv head): its query heads' running max, sum and output row stay on the stack
// while the sequence's keys and values of that head stream past once, in tiles of kKeyTile
// slots (online softmax: each tile's scores, then one rescale of the running output per tile).
// One body for fp32 and bf16 caches (KT = float or the uint16_t bits of bf16, LoadAs in
// bf16_vec-inl.h): bf16 keys and values are widened to fp32 exactly as they are loaded, so the
// scores, the softmax statistics and the output accumulate in fp32 either way.
#include "origami/kernels/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/decode_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"
#include "origami/kernels/vec_math-inl.h"

#ifndef ORIGAMI_KERNELS_DECODE_ATTENTION_SHARED_  // once, not per target
#define ORIGAMI_KERNELS_DECODE_ATTENTION_SHARED_
namespace origami::kernels::decode_attn {
constexpr std::int64_t kKeyTile = 32;
constexpr std::int64_t kMaxRep = kDecodeAttentionMaxRep;
}  // namespace origami::kernels::decode_attn
#endif

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::decode_attn::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// The scaled dots of one key row with R consecutive query heads' rows (d apart), written R
// apart by kKeyTile: one vector accumulator per head over the row, whatever R is.
template <int R, class KT>
HWY_INLINE void Scores(std::int64_t d, const float* q, const KT* kj, float scale, float* p) {
  const DF df;
  VF acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(df);
  ForEachVector(d, [&](std::int64_t e, std::int64_t count) {
    const VF kv = LoadAs(kj + e, count);
    for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(Load(q + r * d + e, count), kv, acc[r]);
  });
  for (int r = 0; r < R; ++r) p[r * kKeyTile] = hn::GetLane(hn::SumOfLanes(df, acc[r])) * scale;
}

// Sequence b, kv head g: out rows of the rep query heads g*rep .. (g+1)*rep - 1.
template <class KT>
HWY_INLINE void Unit(const DecodeAttentionShape& s, std::int64_t b, std::int64_t g, const float* q,
                     const KT* k, const KT* v, std::int64_t q_pos, const std::int64_t* slot_pos,
                     std::int64_t visible, float scale, float* out) {
  const std::int64_t d = s.head_dim, rep = s.heads / s.kv_heads, kvd = s.kv_heads * d;
  const float* qg = q + (b * s.heads + g * rep) * d;  // rep rows of d
  float* og = out + (b * s.heads + g * rep) * d;
  const KT* kb = k + b * s.slots * kvd + g * d;  // slot j's row at kb + j * kvd
  const KT* vb = v + b * s.slots * kvd + g * d;
  float m[kMaxRep], l[kMaxRep];
  for (std::int64_t h = 0; h < rep; ++h) {
    m[h] = -std::numeric_limits<float>::infinity();
    l[h] = 0.0f;
    std::fill(og + h * d, og + (h + 1) * d, 0.0f);
  }
  float p[kMaxRep][kKeyTile];
  std::int64_t keys[kKeyTile];
  for (std::int64_t j0 = 0; j0 < visible; j0 += kKeyTile) {
    // The tile's attended slots.
    std::int64_t n = 0;
    for (std::int64_t j = j0; j < std::min(visible, j0 + kKeyTile); ++j)
      if (slot_pos[j] <= q_pos) keys[n++] = j;
    if (n == 0) continue;
    // Scores: each key's row loaded once per vector for up to four heads' accumulators.
    for (std::int64_t i = 0; i < n; ++i) {
      const KT* kj = kb + keys[i] * kvd;
      std::int64_t h = 0;
      for (; h + 4 <= rep; h += 4) Scores<4>(d, qg + h * d, kj, scale, &p[h][i]);
      for (; h < rep; ++h) Scores<1>(d, qg + h * d, kj, scale, &p[h][i]);
    }
    for (std::int64_t h = 0; h < rep; ++h) {
      float tile_max = -std::numeric_limits<float>::infinity();
      for (std::int64_t i = 0; i < n; ++i) tile_max = std::max(tile_max, p[h][i]);
      const float m_new = std::max(m[h], tile_max);
      const float correction = std::exp(m[h] - m_new);  // 0 for the first tile (m = -inf)
      float* ph = p[h];
      const VF mv = hn::Set(DF(), m_new);
      ForEachVector(n, [&](std::int64_t i, std::int64_t count) {
        Store(Exp(hn::Sub(Load(ph + i, count), mv)), ph + i, count);
      });
      const float sum =
          SumOver(n, [&](std::int64_t i, std::int64_t count) { return Load(ph + i, count); });
      l[h] = l[h] * correction + sum;
      m[h] = m_new;
      float* oh = og + h * d;
      const VF c = hn::Set(DF(), correction);
      ForEachVector(d, [&](std::int64_t e, std::int64_t count) {
        VF acc = hn::Mul(Load(oh + e, count), c);
        for (std::int64_t i = 0; i < n; ++i)
          acc = hn::MulAdd(hn::Set(DF(), p[h][i]), LoadAs(vb + keys[i] * kvd + e, count), acc);
        Store(acc, oh + e, count);
      });
    }
  }
  for (std::int64_t h = 0; h < rep; ++h) {
    if (l[h] == 0.0f) continue;  // nothing attended: zeros
    const VF inv = hn::Set(DF(), 1.0f / l[h]);
    float* oh = og + h * d;
    ForEachVector(d, [&](std::int64_t e, std::int64_t count) {
      Store(hn::Mul(Load(oh + e, count), inv), oh + e, count);
    });
  }
}

template <class KT>
HWY_INLINE void UnitsOf(std::int64_t u0, std::int64_t u1, const DecodeAttentionShape& s,
                        const float* q, const KT* k, const KT* v, const std::int64_t* q_pos,
                        const std::int64_t* slot_pos, const std::int64_t* visible, float scale,
                        float* out) {
  for (std::int64_t u = u0; u < u1; ++u) {
    const std::int64_t b = u / s.kv_heads, g = u % s.kv_heads;
    Unit(s, b, g, q, k, v, q_pos[b], slot_pos, visible[b], scale, out);
  }
}
void Units(std::int64_t u0, std::int64_t u1, const DecodeAttentionShape& s, const float* q,
           const float* k, const float* v, const std::int64_t* q_pos, const std::int64_t* slot_pos,
           const std::int64_t* visible, float scale, float* out) {
  UnitsOf(u0, u1, s, q, k, v, q_pos, slot_pos, visible, scale, out);
}
void UnitsBf16(std::int64_t u0, std::int64_t u1, const DecodeAttentionShape& s, const float* q,
               const std::uint16_t* k, const std::uint16_t* v, const std::int64_t* q_pos,
               const std::int64_t* slot_pos, const std::int64_t* visible, float scale, float* out) {
  UnitsOf(u0, u1, s, q, k, v, q_pos, slot_pos, visible, scale, out);
}

}  // namespace origami::kernels::decode_attn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace decode_attn {
HWY_EXPORT(Units);
HWY_EXPORT(UnitsBf16);

// The dry run's charge and the checks of both element types; false when there is nothing to
// compute.
bool check_decode_attention(const DecodeAttentionShape& s, const void* q, const void* k,
                            const void* v, const std::int64_t* q_pos, const std::int64_t* slot_pos,
                            const std::int64_t* visible, const float* out) {
  if (dryrun::active()) {
    // Charged as one attention_forward per sequence (one query against its visible slots),
    // which is what the planner's decode time assumes.
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const AttentionShape one{.batch = 1,
                               .q_len = 1,
                               .kv_len = visible[b],
                               .heads = s.heads,
                               .kv_heads = s.kv_heads,
                               .head_dim = s.head_dim};
      const double read = static_cast<double>(s.head_dim) *
                          static_cast<double>(s.heads + 2 * visible[b] * s.kv_heads);
      dryrun::skip_kernel(attention_forward_flops(one, &q_pos[b], slot_pos), read);
    }
    return false;
  }
  ORIGAMI_CHECK(s.batch >= 0 && s.slots >= 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0,
                "decode_attention: bad shape B={} slots={} H={} Hkv={} d={}", s.batch, s.slots,
                s.heads, s.kv_heads, s.head_dim);
  ORIGAMI_CHECK(s.heads % s.kv_heads == 0,
                "decode_attention: {} heads not a multiple of {} kv heads", s.heads, s.kv_heads);
  const std::int64_t rep = s.heads / s.kv_heads;
  ORIGAMI_CHECK(rep <= kDecodeAttentionMaxRep,
                "decode_attention: {} query heads per kv head, more than the kernel's {}", rep,
                kDecodeAttentionMaxRep);
  if (s.batch == 0) return false;
  ORIGAMI_CHECK(q != nullptr && k != nullptr && v != nullptr && out != nullptr &&
                    q_pos != nullptr && visible != nullptr && (s.slots == 0 || slot_pos != nullptr),
                "decode_attention: null pointer");
  for (std::int64_t b = 0; b < s.batch; ++b)
    ORIGAMI_CHECK(visible[b] >= 0 && visible[b] <= s.slots,
                  "decode_attention: sequence {} searches {} slots of {}", b, visible[b], s.slots);
  return true;
}
}  // namespace decode_attn

void decode_attention(const DecodeAttentionShape& s, const float* q, const float* k, const float* v,
                      const std::int64_t* q_pos, const std::int64_t* slot_pos,
                      const std::int64_t* visible, float scale, float* out) {
  if (!decode_attn::check_decode_attention(s, q, k, v, q_pos, slot_pos, visible, out)) return;
  detail::parallel_for(s.batch * s.kv_heads, 1, [&](std::int64_t u0, std::int64_t u1) {
    HWY_DYNAMIC_DISPATCH(decode_attn::Units)
    (u0, u1, s, q, k, v, q_pos, slot_pos, visible, scale, out);
  });
}

void decode_attention_bf16(const DecodeAttentionShape& s, const float* q, const bf16* k,
                           const bf16* v, const std::int64_t* q_pos, const std::int64_t* slot_pos,
                           const std::int64_t* visible, float scale, float* out) {
  if (!decode_attn::check_decode_attention(s, q, k, v, q_pos, slot_pos, visible, out)) return;
  const std::uint16_t* kb = bf16_bits(k);
  const std::uint16_t* vb = bf16_bits(v);
  detail::parallel_for(s.batch * s.kv_heads, 1, [&](std::int64_t u0, std::int64_t u1) {
    HWY_DYNAMIC_DISPATCH(decode_attn::UnitsBf16)
    (u0, u1, s, q, kb, vb, q_pos, slot_pos, visible, scale, out);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
