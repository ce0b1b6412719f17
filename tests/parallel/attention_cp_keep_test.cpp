// SequenceAxis::keep_k / keep_v (prefill's KV cache): the context-parallel attention forward
// copies the complete gathered K and V of the call, after RoPE, as [B, Σ*Sl, kvd] with each
// sequence's rows of every rank in rank order -- exactly each rank's own k, v rows.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "origami/comm/run_ranks.h"
#include "origami/parallel/attention_cp.h"
#include "origami/parallel/layout.h"

namespace origami::parallel {
namespace {

std::vector<float> values(std::int64_t n, int salt) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<float>((i * 37 + salt * 11) % 29) / 29.0f - 0.5f;
  return v;
}

TEST(CpAttention, KeepCopiesTheGatheredKvInRankOrder) {
  for (int D : {1, 2, 3}) {
    constexpr std::int64_t B = 2, Sl = 4, d = 8, h = 16;
    const AttentionDims dims{.batch = B, .seq = Sl, .hidden = h, .heads = 2, .kv_heads = 2,
                             .head_dim = d};
    const std::int64_t kvd = dims.kv_heads * d, qd = dims.heads * d, rows = B * Sl;
    const std::vector<float> wq = values(qd * h, 1), wk = values(kvd * h, 2),
                             wv = values(kvd * h, 3), wo = values(h * qd, 4);
    std::vector<std::vector<float>> own_k(static_cast<std::size_t>(D)),
        own_v(static_cast<std::size_t>(D)), kept_k(static_cast<std::size_t>(D)),
        kept_v(static_cast<std::size_t>(D));
    std::mutex m;
    comm::run_ranks(D, [&](comm::Communicator& world) {
      const int r = world.rank();
      MemoryTracker& tracker = world.tracker();
      const TokenLayout layout(TokenLayoutKind::Zigzag, D * Sl, D, r);
      std::vector<std::int64_t> kv_pos;
      for (int p = 0; p < D; ++p)
        for (std::int64_t x : layout.positions_of(p)) kv_pos.push_back(x);
      const RopeTables rope = make_rope_tables(64, d, 10000.0, tracker);
      std::vector<float> keep_k(static_cast<std::size_t>(B * D * Sl * kvd), -1.0f);
      std::vector<float> keep_v(keep_k.size(), -1.0f);
      const SequenceAxis axis{&world, layout.positions().data(), &kv_pos, keep_k.data(),
                              keep_v.data()};
      const std::vector<float> n = values(rows * h, 5 + r);
      std::vector<float> y(static_cast<std::size_t>(rows * h), 0.0f);
      AttentionSaved s;
      cp_attention_forward(dims, n.data(), {wq.data(), wk.data(), wv.data(), wo.data()}, axis,
                           rope, tracker, s, y.data());
      std::lock_guard lock(m);
      const auto i = static_cast<std::size_t>(r);
      own_k[i].assign(s.k.f32(), s.k.f32() + rows * kvd);
      own_v[i].assign(s.v.f32(), s.v.f32() + rows * kvd);
      kept_k[i] = keep_k;
      kept_v[i] = keep_v;
    });
    for (int r = 0; r < D; ++r)
      for (std::int64_t b = 0; b < B; ++b)
        for (int p = 0; p < D; ++p)
          for (std::int64_t e = 0; e < Sl * kvd; ++e) {
            const auto at = static_cast<std::size_t>((b * D + p) * Sl * kvd + e);
            const auto src = static_cast<std::size_t>(b * Sl * kvd + e);
            ASSERT_EQ(kept_k[static_cast<std::size_t>(r)][at], own_k[static_cast<std::size_t>(p)][src])
                << "D=" << D << " rank " << r << " sequence " << b << " block " << p;
            ASSERT_EQ(kept_v[static_cast<std::size_t>(r)][at], own_v[static_cast<std::size_t>(p)][src])
                << "D=" << D << " rank " << r << " sequence " << b << " block " << p;
          }
  }
}

}  // namespace
}  // namespace origami::parallel
