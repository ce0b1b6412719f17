// attention_project_into under AttentionDims::kv: BF16 (training's --precision bf16) leaves K
// and V holding bf16 values, each the nearest-even rounding of the fp32 projection (after
// RoPE), and Q as fp32 computed it; F32 leaves all three as they were.
#include <gtest/gtest.h>

#include <random>

#include "origami/core/bf16.h"
#include "origami/core/memory_tracker.h"
#include "origami/model/blocks.h"

namespace origami {
namespace {

struct Projected {
  std::vector<float> q, k, v;
};

Projected project(DType kv) {
  const AttentionDims d{.batch = 1, .seq = 7, .hidden = 24, .heads = 4, .kv_heads = 2,
                        .head_dim = 6, .kv = kv};
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random = [&](std::int64_t n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = normal(rng);
    return x;
  };
  std::vector<float> n = random(rows * d.hidden), wq = random(qd * d.hidden),
                     wk = random(kvd * d.hidden), wv = random(kvd * d.hidden),
                     wo = random(d.hidden * qd);
  MemoryTracker tracker;
  const RopeTables rope = make_rope_tables(64, d.head_dim, 10000.0, tracker);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(d.seq));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(3 * i);
  Projected p{std::vector<float>(static_cast<std::size_t>(rows * qd)),
              std::vector<float>(static_cast<std::size_t>(rows * kvd)),
              std::vector<float>(static_cast<std::size_t>(rows * kvd))};
  attention_project_into(d, n.data(), {wq.data(), wk.data(), wv.data(), wo.data()},
                         pos.data(), rope, p.q.data(), p.k.data(), p.v.data());
  return p;
}

TEST(AttentionProject, Bf16KvHoldsTheRoundedKAndVAndLeavesQ) {
  const Projected f = project(DType::F32), b = project(DType::BF16);
  EXPECT_EQ(b.q, f.q);
  int changed = 0;
  for (auto [round, exact] : {std::pair{&b.k, &f.k}, std::pair{&b.v, &f.v}})
    for (std::size_t i = 0; i < exact->size(); ++i) {
      EXPECT_EQ((*round)[i], round_to_bf16((*exact)[i])) << i;
      changed += (*round)[i] != (*exact)[i];
    }
  EXPECT_GT(changed, 0) << "the fp32 projections were bf16 values already: a test that cannot fail";
}

}  // namespace
}  // namespace origami
