// Resharding: a checkpoint saved under one strategy / degree loads under another (each rank
// reads the intersection of its block with the saved blocks), and the next step's loss equals
// the saving layout's. When TSP lands, its cases are one more line in kPairs (e.g.
// {{"tsp", 4, ""}, {"tp", 1, "tp=2,sp=2"}}), since TSP's shards are ShardSpecs too.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "ckpt_util.h"
#include "origami/parallel/shard_spec.h"

namespace origami::ckpt_test {
namespace {

struct Pair {
  Layout from, to;
  std::int64_t kv_heads = 0;  // another kv-head count than tiny_model's 12 (0: its own)
  std::int64_t head_dim = 0;  // an explicit head_dim (0: hidden / heads = 4)
};

const Pair kPairs[] = {
    {{"tp", 2, ""}, {"single", 1, ""}},
    {{"sp", 4, ""}, {"tp", 1, "tp=2,sp=2"}},
    {{"tp", 1, "dp=2,tp=2"}, {"single", 1, ""}},
    {{"single", 1, ""}, {"tp", 2, ""}},
    {{"tpsp", 2, ""}, {"dp", 2, ""}},
    {{"tsp", 4, ""}, {"tp", 1, "tp=2,sp=2"}},
    {{"tp", 2, ""}, {"tsp", 3, ""}},
    {{"tsp", 1, "dp=2,tsp=2"}, {"single", 1, ""}},
    // Kv heads replicated (12 heads over 2 kv heads at degree 4: each kv head held by 2
    // ranks, saved once), loaded by fewer ranks, by one, and by TP's replicas; over 1 kv head
    // (4 replicas) into TP.
    {{"tsp", 4, ""}, {"tsp", 2, ""}, 2},
    {{"tsp", 4, ""}, {"single", 1, ""}, 2},
    {{"tp", 2, ""}, {"tp", 4, ""}, 2},
    {{"tsp", 4, ""}, {"tp", 2, ""}, 1},
    // An explicit head_dim (12 heads x 8 = 96 beside hidden 48): TSP's head groups into
    // TP+SP's and TP's into TSP 3's; kv heads replicated into one device.
    {{"tsp", 4, ""}, {"tp", 1, "tp=2,sp=2"}, 0, 8},
    {{"tp", 2, ""}, {"tsp", 3, ""}, 0, 8},
    {{"tsp", 4, ""}, {"single", 1, ""}, 2, 8},
};

class Reshard : public ::testing::TestWithParam<Pair> {};

TEST_P(Reshard, NextStepLossMatchesSavingLayout) {
  const Pair p = GetParam();
  const std::string a = fresh_dir("from"), b = fresh_dir("to");
  TrainOptions oa = tiny_options(p.from, 4);
  if (p.kv_heads > 0) oa.model.num_key_value_heads = p.kv_heads;
  oa.model.explicit_head_dim = p.head_dim;
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  TrainOptions ob = tiny_options(p.to, 4);
  ob.model = oa.model;
  ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  const TrainResult rb = quiet_train(ob);
  ASSERT_EQ(rb.steps.size(), 1u);
  EXPECT_EQ(rb.steps[0].step, 4);
  // Different layouts sum in different orders: float32 rounding only.
  const double want = ra.steps[3].loss;
  EXPECT_NEAR(rb.steps[0].loss, want, 2e-5 * std::abs(want))
      << p.from.name() << " -> " << p.to.name();
  EXPECT_NEAR(rb.steps[0].grad_norm, ra.steps[3].grad_norm, 1e-4 * ra.steps[3].grad_norm);
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Reshard, ::testing::ValuesIn(kPairs),
                         [](const auto& info) {
                           std::string n = info.param.from.name() + "_to_" + info.param.to.name();
                           if (info.param.kv_heads > 0)
                             n += "_kv" + std::to_string(info.param.kv_heads);
                           if (info.param.head_dim > 0)
                             n += "_head_dim" + std::to_string(info.param.head_dim);
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Per-tensor parity: a tp-2 checkpoint (of tiny_model over 2 kv heads) loaded whole (the
// single-device layout) and loaded as each rank's block of tp 1, 2 and 4 (each kv head then
// replicated over 2 ranks) agree exactly, for parameters and both moments.
TEST(ReshardParity, EveryBlockIsTheSliceOfTheWholeTensor) {
  const std::string d = fresh_dir("parity");
  TrainOptions o = tiny_options({"tp", 2, ""}, 2);
  o.model.num_key_value_heads = 2;
  o.checkpoint.save_dir = d;
  quiet_train(o);
  const std::string c = ckpt::checkpoint_dir(d, 2);
  const ModelConfig cfg = o.model;
  MemoryTracker tracker("parity");
  const kernels::AdamWHyper hyper{};
  // The whole model (single-device specs).
  const auto whole_specs = parallel::make_shard_specs(cfg, 1, 0);
  ModelTensors whole = parallel::allocate_sharded(cfg, whole_specs, tracker, MemCategory::Parameters);
  AdamW whole_opt(whole, tracker, hyper);
  ckpt::load(c, cfg, {&whole_specs, &whole, &whole_opt});
  EXPECT_EQ(whole_opt.steps_taken(), 2);
  for (int tp : {1, 2, 4})
    for (int r = 0; r < tp; ++r) {
      const auto specs = parallel::make_shard_specs(cfg, tp, r);
      ModelTensors part = parallel::allocate_sharded(cfg, specs, tracker, MemCategory::Parameters);
      AdamW part_opt(part, tracker, hyper);
      ckpt::load(c, cfg, {&specs, &part, &part_opt});
      ModelTensors* wk[] = {&whole, &whole_opt.first_moment(), &whole_opt.second_moment()};
      ModelTensors* pk[] = {&part, &part_opt.first_moment(), &part_opt.second_moment()};
      for (int kind = 0; kind < 3; ++kind) {
        auto w = named_tensors(*wk[kind]);
        auto q = named_tensors(*pk[kind]);
        for (std::size_t i = 0; i < specs.size(); ++i) {
          const auto& s = specs[i];
          const std::int64_t cols = s.local.size() > 1 ? s.local[1] : 1;
          const std::int64_t gcols = s.global.size() > 1 ? s.global[1] : 1;
          const std::int64_t o1 = s.offset.size() > 1 ? s.offset[1] : 0;
          std::int64_t mismatches = 0;
          for (std::int64_t row = 0; row < s.local[0]; ++row)
            for (std::int64_t col = 0; col < cols; ++col) {
              const std::int64_t grow = s.offset[0] + row;
              const float got = q[i].tensor->f32()[row * cols + col];
              const float want =
                  grow < s.global[0] ? w[i].tensor->f32()[grow * gcols + o1 + col] : 0.0f;
              mismatches += std::memcmp(&got, &want, sizeof(float)) != 0;
            }
          EXPECT_EQ(mismatches, 0) << s.name << " kind " << kind << " tp " << tp << " rank " << r;
        }
      }
    }
  // Something non-trivial was loaded (not the zero buffers).
  EXPECT_NE(whole_opt.second_moment().lm_head.f32()[0], 0.0f);
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace origami::ckpt_test
