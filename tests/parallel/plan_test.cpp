// Layouts, shard specs and plans: positions of every layout, slices that equal the
// single-device tensor, and bad input refused up front with the constraint and a working value.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/core/rng.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/registry.h"
#include "origami/parallel/shard_spec.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::parallel {
namespace {

TEST(TokenLayout, ZigzagGivesRankRChunksRAnd2DMinus1MinusR) {
  const TokenLayout l(TokenLayoutKind::Zigzag, 16, 4, 1);
  EXPECT_EQ(l.positions(), (std::vector<std::int64_t>{2, 3, 12, 13}));
  // Every position exactly once over the ranks, for each kind and several degrees.
  for (auto kind : {TokenLayoutKind::Zigzag, TokenLayoutKind::Contiguous}) {
    for (int D : {1, 2, 3, 4}) {
      std::vector<std::int64_t> all;
      for (int r = 0; r < D; ++r) {
        const TokenLayout x(kind, 24, D, r);
        all.insert(all.end(), x.positions().begin(), x.positions().end());
      }
      std::sort(all.begin(), all.end());
      std::vector<std::int64_t> want(24);
      std::iota(want.begin(), want.end(), 0);
      EXPECT_EQ(all, want);
    }
  }
  EXPECT_EQ(TokenLayout(TokenLayoutKind::Contiguous, 12, 3, 2).positions(),
            (std::vector<std::int64_t>{8, 9, 10, 11}));
}

TEST(TokenLayout, SliceAndScatterAreInverse) {
  const TokenLayout l(TokenLayoutKind::Zigzag, 8, 2, 1);
  std::vector<float> global(2 * 8);
  std::iota(global.begin(), global.end(), 0.0f);
  const std::vector<float> local = l.slice(global.data(), 2);
  EXPECT_EQ(local, (std::vector<float>{2, 3, 4, 5, 10, 11, 12, 13}));
  std::vector<float> back(16, -1.0f);
  l.scatter_rows(local.data(), 2, 1, back.data());
  for (std::int64_t p : {2, 3, 4, 5}) EXPECT_EQ(back[p], global[p]);
  EXPECT_EQ(back[0], -1.0f);
}

TEST(TokenLayout, RefusesSequencesThatDoNotSplit) {
  try {
    TokenLayout(TokenLayoutKind::Zigzag, 20, 4, 0);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("2 x degree"), std::string::npos) << m;
    EXPECT_NE(m.find("degree 2"), std::string::npos) << m;  // 20 % 4 == 0
  }
  EXPECT_THROW(TokenLayout(TokenLayoutKind::Contiguous, 10, 4, 0), ConfigError);
  EXPECT_NO_THROW(TokenLayout(TokenLayoutKind::Contiguous, 12, 4, 3));
}

ModelConfig small_model() {
  ModelConfig c;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

TEST(ShardSpec, ShardsEqualSlicesOfTheSingleDeviceTensorsAndGatherBack) {
  const ModelConfig c = small_model();
  MemoryTracker full_tracker;
  ModelTensors full = allocate_model_tensors(c, full_tracker, MemCategory::Parameters);
  initialize_parameters(full, c, 99);
  std::vector<NamedTensor> want = named_tensors(full);
  comm::run_ranks(2, [&](comm::Communicator& world) {
    const std::vector<ShardSpec> specs = make_shard_specs(c, 2, world.rank());
    ModelTensors mine = allocate_sharded(c, specs, world.tracker(), MemCategory::Parameters);
    initialize_sharded(mine, specs, c, 99);
    std::vector<NamedTensor> got = named_tensors(mine);
    for (std::size_t i = 0; i < specs.size(); ++i) {
      MemoryTracker scratch;
      const Tensor g = gather_full(specs[i], *got[i].tensor, world, scratch);
      ASSERT_EQ(g.shape(), want[i].tensor->shape()) << specs[i].name;
      for (std::int64_t e = 0; e < g.numel(); ++e)
        ASSERT_EQ(g.f32()[e], want[i].tensor->f32()[e]) << specs[i].name << " element " << e;
    }
  });
}

TEST(ShardSpec, RefusesDegreesThatDoNotDivideHeads) {
  const ModelConfig c = small_model();  // 4 heads, 2 kv heads
  // 12 heads over 4 kv heads at degree 6: 6 neither divides 4 nor is a multiple of it.
  try {
    make_shard_specs(parity::make_model(97, 96, 96, 12, 4), 6, 0);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("num_key_value_heads, 4"), std::string::npos) << m;
    EXPECT_NE(m.find("or be a multiple of it"), std::string::npos) << m;
    EXPECT_NE(m.find("largest degree that works is 4"), std::string::npos) << m;
  }
  try {
    make_shard_specs(c, 3, 0);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("attention heads"), std::string::npos) << e.what();
  }
}

// More ranks than kv heads: rank t holds kv head t / (T / Hkv), the same block as its
// replicas; only the first replica counts it in the gradient norm; the other tensors are split
// as usual.
TEST(ShardSpec, KvHeadsReplicatedAboveTheirCount) {
  const ModelConfig c = parity::make_model(97, 64, 96, 8, 2);  // d 8, kv rows 16
  EXPECT_EQ(kv_replicas(c, 8), 4);
  EXPECT_EQ(kv_heads_per_rank(c, 8), 1);
  EXPECT_EQ(kv_replicas(c, 2), 1);
  EXPECT_EQ(kv_heads_per_rank(c, 2), 1);
  EXPECT_EQ(kv_heads_per_rank(c, 1), 2);
  for (int t = 0; t < 8; ++t) {
    const std::vector<ShardSpec> specs = make_shard_specs(c, 8, t);
    for (const ShardSpec& s : specs) {
      const bool kv = s.name.find("k_proj") != std::string::npos ||
                      s.name.find("v_proj") != std::string::npos;
      if (kv) {
        EXPECT_EQ(s.local, (Shape{8, 64})) << s.name;
        EXPECT_EQ(s.offset, (Shape{(t / 4) * 8, 0})) << s.name << " rank " << t;
        EXPECT_EQ(s.replicas, 4);
        EXPECT_EQ(s.norm_counted, t % 4 == 0);
      } else {
        EXPECT_EQ(s.replicas, 1) << s.name;
        EXPECT_TRUE(s.norm_counted) << s.name;
      }
      if (s.name.find("q_proj") != std::string::npos) {
        EXPECT_EQ(s.offset, (Shape{t * 8, 0})) << s.name;
      }
    }
  }
  // The reduction groups: the replicas' gradients summed over the kv-replica group.
  std::vector<ShardSpec> specs = make_shard_specs(c, 4, 1);
  assign_reduction_axes(ParallelConfig{.tp = 4, .sp = 2}, specs);
  for (const ShardSpec& s : specs) {
    if (s.replicas > 1) {
      EXPECT_EQ(s.grad_sum_axes, (std::vector<std::string>{"sp", "tp-kv"})) << s.name;
    }
  }
  specs = make_shard_specs(c, 4, 1);
  assign_reduction_axes(ParallelConfig{.dp = 2, .tsp = 4}, specs);
  for (const ShardSpec& s : specs) {
    if (s.replicas > 1) {
      EXPECT_EQ(s.grad_sum_axes, (std::vector<std::string>{"dp", "tsp-kv"})) << s.name;
    }
  }
}

TEST(Plan, StrategyNamesMapToDegrees) {
  auto p = make_parallel_config("tpsp", 4, "", false, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.tp, 4);
  EXPECT_TRUE(p.sequence_parallel);
  p = make_parallel_config("cp", 2, "", false, TokenLayoutKind::Contiguous);
  EXPECT_EQ(p.sp, 2);
  p = make_parallel_config("tp", 1, "dp=2,tp=2,sp=2", true, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.dp * 100 + p.tp * 10 + p.sp, 222);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.mesh_spec(), "dp=2,sp=2,tp=2");
  EXPECT_THROW(make_parallel_config("tsp2", 2, "", false, TokenLayoutKind::Zigzag), ConfigError);
  EXPECT_THROW(make_parallel_config("tp", 2, "tp=2", false, TokenLayoutKind::Zigzag), ConfigError);
  EXPECT_THROW(make_parallel_config("dp", 1, "dp=2,tp=2", false, TokenLayoutKind::Zigzag),
               ConfigError);
  EXPECT_THROW(make_parallel_config("single", 2, "", false, TokenLayoutKind::Zigzag), ConfigError);
}

TEST(Plan, TspAxisIsNamedTspAndAMeshImpliesItsStrategy) {
  // Issue 14, item 11: a stall report names the communicator; under TSP it said 'sp'.
  const auto p = make_parallel_config("tsp", 2, "", false, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.mesh_spec(), "dp=1,tsp=2,tp=1");
  comm::run_ranks(2, [&](comm::Communicator& w) {
    ParallelGroups g(w, p);
    EXPECT_EQ(g.tsp().name(), "tsp");
    EXPECT_EQ(&g.tokens(), &g.tsp());     // the axis that splits the tokens is TSP's
    EXPECT_EQ(&g.axis("tsp"), &g.tsp());  // the specs name it
  });
  EXPECT_EQ(strategy_of_mesh("dp=2,tsp=2"), "tsp");
  EXPECT_EQ(strategy_of_mesh("tp=2,sp=2"), "tp");
  EXPECT_EQ(strategy_of_mesh("cp=2"), "sp");
  EXPECT_EQ(strategy_of_mesh("dp=4"), "dp");
}

TEST(Plan, ReductionAxesAreStatedPerTensor) {
  const ModelConfig c = small_model();
  auto axes_of = [&](const ParallelConfig& p, const std::string& name) {
    std::vector<ShardSpec> specs = make_shard_specs(c, p.tp, 0);
    assign_reduction_axes(p, specs);
    for (const ShardSpec& s : specs)
      if (s.name == name) return std::pair{s.grad_sum_axes, s.norm_sum_axes};
    ADD_FAILURE() << name;
    return std::pair<std::vector<std::string>, std::vector<std::string>>{};
  };
  using V = std::vector<std::string>;
  const std::string norm = "model.layers.0.input_layernorm.weight";
  const std::string wq = "model.layers.0.self_attn.q_proj.weight";
  ParallelConfig tp;  // plain TP with dp and sp around it
  tp.dp = 2;
  tp.tp = 2;
  tp.sp = 2;
  EXPECT_EQ(axes_of(tp, norm), std::pair(V{"sp", "dp"}, V{}));
  EXPECT_EQ(axes_of(tp, wq), std::pair(V{"sp", "dp"}, V{"tp"}));
  ParallelConfig tpsp = tp;
  tpsp.sequence_parallel = true;
  EXPECT_EQ(axes_of(tpsp, norm), std::pair(V{"sp", "dp", "tp"}, V{}));
  EXPECT_EQ(axes_of(tpsp, "lm_head.weight"), std::pair(V{"sp", "dp"}, V{"tp"}));
  ParallelConfig one;  // single device: nothing to reduce
  EXPECT_EQ(axes_of(one, wq), std::pair(V{}, V{}));
}

// TSP's expert schedule (docs/moe.md): expert e whole on rank e / (E/D), an empty block on
// the others; its gradient summed over dp only and its squares counted on the tsp axis, as a
// sharded tensor's; the router replicated (summed over tsp and dp, counted once).
TEST(Plan, ExpertScheduleOwnsWholeExpertsReducedOverDpOnly) {
  ModelConfig c = small_model();
  c.num_local_experts = 4;
  c.num_experts_per_tok = 2;
  ParallelConfig p;
  p.dp = 2;
  p.tsp = 2;
  p.moe_schedule = MoeSchedule::Expert;
  using V = std::vector<std::string>;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<ShardSpec> specs = make_shard_specs(c, 2, rank);
    own_whole_experts(c, 2, rank, specs);
    assign_reduction_axes(p, specs);
    for (const ShardSpec& s : specs) {
      if (s.name.find("block_sparse_moe.experts.") != std::string::npos) {
        const int e = std::stoi(s.name.substr(s.name.find("experts.") + 8));
        EXPECT_EQ(s.owner, e / 2) << s.name;
        EXPECT_EQ(s.local, e / 2 == rank ? s.global : Shape{0}) << s.name << " rank " << rank;
        EXPECT_EQ(s.grad_sum_axes, V{"dp"}) << s.name;
        EXPECT_EQ(s.norm_sum_axes, V{"tsp"}) << s.name;
      } else if (s.name.find("block_sparse_moe.gate") != std::string::npos) {
        EXPECT_EQ(s.owner, -1);
        EXPECT_EQ(s.grad_sum_axes, (V{"tsp", "dp"}));
        EXPECT_EQ(s.norm_sum_axes, V{});
      }
    }
  }
}

TEST(Plan, RefusesPlansThatCannotRunBeforeAnyWork) {
  const ModelConfig c = small_model();
  ParallelConfig p;
  p.tp = 2;
  try {
    validate_plan(p, c, 16, 2, 4);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 2 ranks but the world has 4"), std::string::npos)
        << e.what();
  }
  p = ParallelConfig{};
  p.sp = 4;
  EXPECT_THROW(validate_plan(p, c, 12, 1, 4), ConfigError);  // 12 % 8 != 0 (zigzag)
  p.layout = TokenLayoutKind::Contiguous;
  EXPECT_NO_THROW(validate_plan(p, c, 12, 1, 4));
  p = ParallelConfig{};
  p.dp = 2;
  // The micro-batch is each replica's own (global batch = micro-batch x dp x grad-accum):
  // dp divides nothing, and 1 sequence per replica is a plan.
  EXPECT_NO_THROW(validate_plan(p, c, 12, 3, 2));
  EXPECT_NO_THROW(validate_plan(p, c, 12, 1, 2));
  p = ParallelConfig{};
  p.tp = 2;
  p.sequence_parallel = true;
  EXPECT_THROW(validate_plan(p, c, 3, 1, 2), ConfigError);  // 3 rows over tp=2
}

// Bad input refused up front, the constraint named.
TEST(Plan, TspRefusesDegreesThatDoNotDivide) {
  const ParallelConfig p6{.tsp = 6};
  try {
    validate_plan(p6, parity::make_model(97, 96, 96, 12, 4), 24, 2, 6);  // 4 kv heads, 6
    FAIL() << "degree 6 over 4 kv heads accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("largest degree that works is 4"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("tsp"), std::string::npos) << e.what();
  }
  // Above the kv heads, a multiple of them: each kv head replicated (2 kv heads, degree 4).
  EXPECT_NO_THROW(validate_plan({.tsp = 4}, parity::make_model(97, 64, 96, 4, 2), 24, 2, 4));
  EXPECT_NO_THROW(validate_plan({.tp = 4}, parity::make_model(97, 64, 96, 4, 2), 24, 2, 4));
  EXPECT_THROW(validate_plan({.tsp = 3}, parity::make_model(100, 64, 96, 4, 4), 24, 2, 3),
               ConfigError);  // heads 4
  EXPECT_THROW(validate_plan({.tsp = 4}, parity::make_model(100, 64, 96, 4, 4), 20, 2, 4),
               ConfigError);  // 20 % 8
  EXPECT_NO_THROW(validate_plan({.tsp = 4}, parity::make_model(100, 64, 96, 4, 4), 24, 2, 4));
  const ParallelConfig words =
      make_parallel_config("tsp", 1, "dp=2,tsp=2", false, TokenLayoutKind::Zigzag);
  EXPECT_TRUE(words.is_tsp());
  EXPECT_EQ(words.dp, 2);
  EXPECT_EQ(words.tsp, 2);
  EXPECT_THROW(make_parallel_config("tsp", 1, "tp=2,tsp=2", false, TokenLayoutKind::Zigzag),
               ConfigError);
}

}  // namespace
}  // namespace origami::parallel
