// Decode moves no weight bytes (docs/design.md §6): from the communicators' accounting, one decode
// step with greedy sampling is exactly
//   all_reduce          1 + 2L calls of B*h floats (embedding; per layer W_O and W_down)
//   all_reduce_maxloc   1 call of B (value, index) pairs (16 bytes each)
// and nothing else (no broadcast, no point-to-point, nothing on the world communicator).
// The ring all-reduce (docs/comm.md) sends 2(D-1)/D of the buffer per rank when its count is
// a multiple of D, so each rank sends exactly
//   (1 + 2L) * 2(D-1)/D * B*h*4  +  2(D-1)/D * B*16   bytes,
// against a weight shard of (2(H+Hkv)d*h + 3f*h)/D floats per layer that never moves.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "infer_harness.h"
#include "origami/comm/run_ranks.h"

namespace origami::infer_test {
namespace {

class DecodeTraffic : public ::testing::TestWithParam<int> {};

TEST_P(DecodeTraffic, IsExactlyTheAllReducesOfHiddenVectorsAndTheArgMax) {
  const int D = GetParam();
  const ModelConfig c = gqa_model();
  const auto prompts = random_prompts(c, {4, 9, 7, 2});  // B = 4: a multiple of D
  const std::int64_t B = 4, h = c.hidden_size, L = c.num_hidden_layers;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker());
    e.initialize(kSeed);
    const infer::SamplingOptions greedy;
    const Tensor* logits = &e.prefill(prompts, 3);
    auto tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 0);
    world.reset_stats();
    e.axis().reset_stats();
    logits = &e.decode(tok);
    tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 1);
    const comm::CommStats s = e.axis().stats();
    const std::int64_t ring = 2 * (D - 1);  // numerator of 2(D-1)/D
    EXPECT_EQ(s.op("all_reduce").calls, 1 + 2 * L);
    EXPECT_EQ(s.op("all_reduce").bytes_sent, (1 + 2 * L) * ring * B * h * 4 / D);
    EXPECT_EQ(s.op("all_reduce_maxloc").calls, 1);
    EXPECT_EQ(s.op("all_reduce_maxloc").bytes_sent, ring * B * 16 / D);
    EXPECT_EQ(s.ops.size(), 2u) << s.summary();
    EXPECT_EQ(s.total().bytes_sent, (1 + 2 * L) * ring * B * h * 4 / D + ring * B * 16 / D);
    EXPECT_EQ(world.stats().total().bytes_sent, 0) << world.stats().summary();
    // Far below one layer's weight shard: no weight could have moved.
    const std::int64_t shard =
        (2 * (c.num_attention_heads + c.num_key_value_heads) * c.head_dim() * h +
         3 * c.intermediate_size * h) /
        D * 4;
    EXPECT_LT(s.total().bytes_sent, shard);
  });
}

INSTANTIATE_TEST_SUITE_P(Degrees, DecodeTraffic, ::testing::Values(2, 4));

// Keeping the cache adds no traffic to the TSP forward: on the axis, prefill is exactly the
// forward's K/V all-gathers (2 per head group per layer, each rank sending the other rank its
// R*kvd floats at D = 2), the embedding's 3 all-to-alls, and B broadcasts of h floats (each
// prompt's last hidden row), plus the splits that make TspOps' own communicators (setup
// only; the weight shards travel on them).
TEST(PrefillTraffic, IsTheTspForwardsPlusTheLastHiddenRows) {
  const int D = 2;
  const ModelConfig c = gqa_model();
  const auto prompts = random_prompts(c, {4, 9, 7, 2});  // padded to S = 12
  const std::int64_t B = 4, S = 12, R = B * S / D, L = c.num_hidden_layers, h = c.hidden_size;
  const std::int64_t kvd = c.num_key_value_heads / D * c.head_dim();
  std::mutex m;
  std::int64_t broadcast_bytes = 0;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker());
    e.initialize(kSeed);
    world.reset_stats();
    e.axis().reset_stats();
    e.prefill(prompts, 2);
    EXPECT_EQ(e.prefill_length(), S);
    const comm::CommStats s = e.axis().stats();
    EXPECT_EQ(s.op("all_gather").calls, 2 * D * L);
    EXPECT_EQ(s.op("all_gather").bytes_sent, 2 * D * L * (D - 1) * R * kvd * 4);
    EXPECT_EQ(s.op("all_to_all").calls, 3);
    EXPECT_EQ(s.op("broadcast").calls, B);
    EXPECT_EQ(s.ops.size() - s.ops.count("split"), 3u) << s.summary();
    EXPECT_EQ(world.stats().total().bytes_sent, 0) << world.stats().summary();
    std::lock_guard lock(m);
    broadcast_bytes += s.op("broadcast").bytes_sent;
  });
  EXPECT_EQ(broadcast_bytes, B * h * 4);
}

}  // namespace
}  // namespace origami::infer_test

namespace origami::infer_test {
namespace {

// The cache is sharded by head group: each rank holds exactly 2*L*B*capacity*(Kv/D)*d floats
// (capacity = max(S, longest prompt + max_new_tokens)), so the ranks together hold what one
// device holds (at the same capacity) -- no replica (TRAPS.md: KV cache mirrored on every
// rank while queries are split by head).
TEST(KvCacheMemory, IsShardedByHeadGroupExactly) {
  const ModelConfig c = gqa_model();
  const auto prompts = random_prompts(c, {4, 9, 7, 2});  // longest 9: S = 16 at D = 4 zigzag
  const std::int64_t B = 4, L = c.num_hidden_layers, d = c.head_dim(), new_tokens = 10;
  const std::int64_t cap = 9 + new_tokens;  // >= S at every D here
  for (int D : {1, 2, 4}) {
    std::mutex m;
    std::int64_t total = 0;
    comm::run_ranks(D, [&](comm::Communicator& world) {
      infer::InferenceEngine e(c, world, world.tracker());
      e.initialize(kSeed);
      e.prefill(prompts, new_tokens);
      const std::int64_t mine = world.tracker().current(MemCategory::KvCache);
      EXPECT_EQ(mine, 2 * L * B * cap * (c.num_key_value_heads / D) * d * 4) << "D " << D;
      std::lock_guard lock(m);
      total += mine;
    });
    EXPECT_EQ(total, 2 * L * B * cap * c.num_key_value_heads * d * 4) << "D " << D;
  }
}

// Above the kv heads (2 kv heads at D = 4 and 8) each rank keeps its one kv head's cache,
// 2*L*B*capacity*d floats, the same as at D = Hkv: the D / Hkv replicas of a kv head hold
// equal copies (the K/V its rank projected from the same W_K, W_V rows), so the ranks
// together hold D / Hkv times one device's cache.
TEST(KvCacheMemory, IsOneKvHeadPerRankAboveTheKvHeads) {
  const ModelConfig c = gqa_model(2);
  const auto prompts = random_prompts(c, {4, 9, 7, 2});  // longest 9: S = 16 at D = 8 zigzag
  const std::int64_t B = 4, L = c.num_hidden_layers, d = c.head_dim(), new_tokens = 10;
  const std::int64_t cap = 9 + new_tokens;  // >= S at every D here
  for (int D : {4, 8}) {
    const int replicas = D / 2;
    std::mutex m;
    std::vector<std::vector<float>> kv_of_rank(static_cast<std::size_t>(D));
    comm::run_ranks(D, [&](comm::Communicator& world) {
      infer::InferenceEngine e(c, world, world.tracker());
      e.initialize(kSeed);
      e.prefill(prompts, new_tokens);
      e.decode({1, 2, 3, 4});
      EXPECT_EQ(world.tracker().current(MemCategory::KvCache), 2 * L * B * cap * d * 4)
          << "D " << D;
      // The last layer's keys and values of every sequence's written slots: the prefill's S
      // (the decoded token went to a padded one of them).
      const infer::KvCache& kv = *e.cache();
      const std::int64_t S = e.prefill_length();
      std::lock_guard lock(m);
      std::vector<float>& mine = kv_of_rank[static_cast<std::size_t>(world.rank())];
      for (std::int64_t b = 0; b < B; ++b)
        for (const float* p : {kv.k(L - 1, b), kv.v(L - 1, b)})
          mine.insert(mine.end(), p, p + S * d);
    });
    // Replicas of one kv head (the D / Hkv consecutive ranks of a group) hold the same keys and
    // values (bitwise: the same rows projected by the same kernel), the two kv heads others.
    for (int r = 0; r < D; ++r)
      EXPECT_EQ(kv_of_rank[static_cast<std::size_t>(r)],
                kv_of_rank[static_cast<std::size_t>(r / replicas * replicas)])
          << "D " << D << " rank " << r;
    EXPECT_NE(kv_of_rank[0], kv_of_rank[static_cast<std::size_t>(replicas)]) << "D " << D;
  }
}

}  // namespace
}  // namespace origami::infer_test
