// The pipeline axis (issue 20, step 1): pp as the outermost mesh axis, its groups, the layer
// split per stage (given or balanced), each stage's rank holding only its tensors, and the
// refusals that name what to change; and the 1F1B order each stage runs, timed on a slot
// clock against its formulas. (Parity of the stages' training: pipeline_parity_test.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/pipeline_schedule.h"
#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/registry.h"

namespace origami::parallel {
namespace {

using ::testing::HasSubstr;

using StageCounts = std::vector<std::int64_t>;

// The message of the ConfigError `fn` throws ("" when it throws none).
template <typename Fn>
std::string pipeline_refusal(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Each named tensor's stage (pp rank) under `split` is the one given.
void expect_tensor_stages(const PipelineSplit& split,
                          const std::vector<std::pair<std::string, int>>& want) {
  for (const auto& [name, stage] : want) EXPECT_EQ(stage_of_tensor(name, split), stage) << name;
}

TEST(PipelineStages, BalancedSplitFollowsItsStatedRule) {
  // The header's examples.
  EXPECT_EQ(balanced_stage_layers(5, 2), (StageCounts{3, 2}));
  EXPECT_EQ(balanced_stage_layers(8, 3), (StageCounts{3, 3, 2}));
  EXPECT_EQ(balanced_stage_layers(6, 4), (StageCounts{1, 2, 2, 1}));
  EXPECT_EQ(balanced_stage_layers(7, 4), (StageCounts{2, 2, 2, 1}));
  EXPECT_EQ(balanced_stage_layers(8, 4), (StageCounts{2, 2, 2, 2}));
  EXPECT_EQ(balanced_stage_layers(7, 1), (StageCounts{7}));
  EXPECT_EQ(balanced_stage_layers(3, 3), (StageCounts{1, 1, 1}));
  // Every split of up to 40 layers: sums to L, at least one layer a stage, within one of each
  // other, the extras on the interior stages first, then on stage 0, never on the last stage.
  for (std::int64_t L = 1; L <= 40; ++L)
    for (int p = 1; p <= L; ++p) {
      const StageCounts c = balanced_stage_layers(L, p);
      ASSERT_EQ(std::ssize(c), p);
      EXPECT_EQ(std::accumulate(c.begin(), c.end(), std::int64_t{0}), L) << L << " " << p;
      const auto [lo, hi] = std::minmax_element(c.begin(), c.end());
      EXPECT_GE(*lo, 1);
      EXPECT_LE(*hi - *lo, 1) << L << " " << p;
      const std::int64_t base = L / p, extra = L % p;
      EXPECT_EQ(c.back(), p == 1 ? L : base) << L << " " << p;
      const std::int64_t interior_extra = std::min<std::int64_t>(extra, std::max(0, p - 2));
      for (int s = 1; s + 1 < p; ++s) {
        EXPECT_EQ(c[static_cast<std::size_t>(s)], base + (s <= interior_extra ? 1 : 0));
      }
      if (p > 1) {
        EXPECT_EQ(c[0], base + (extra > interior_extra ? 1 : 0)) << L << " " << p;
      }
    }
}

TEST(PipelineStages, StageRangesAreContiguousFromTheSplit) {
  ParallelConfig p{.pp = 2, .pp_layers = {3, 5}};
  std::vector<StageLayers> s = stage_layers(p, 8).chunks;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first, 0);
  EXPECT_EQ(s[0].count, 3);
  EXPECT_EQ(s[1].first, 3);
  EXPECT_EQ(s[1].count, 5);
  p.pp = 3;
  p.pp_layers.clear();  // the balanced default
  s = stage_layers(p, 8).chunks;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].first + s[2].count, 8);
  for (std::size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i].first, s[i - 1].first + s[i - 1].count);
}

TEST(PipelineStages, PpLayersParseOrNameTheBadItem) {
  EXPECT_EQ(parse_pp_layers(""), StageCounts{});
  EXPECT_EQ(parse_pp_layers("3,5"), (StageCounts{3, 5}));
  EXPECT_EQ(parse_pp_layers("1,1,6"), (StageCounts{1, 1, 6}));
  for (const char* bad : {"3,,5", "3,", "a", "0,4", "-1,3", "+3", "3, 5", "2.5", "99999999999999"}) {
    const std::string m = pipeline_refusal([&] { parse_pp_layers(bad); });
    EXPECT_THAT(m, HasSubstr("--pp-layers")) << bad;
    EXPECT_THAT(m, HasSubstr("e.g. --pp-layers 3,5")) << bad;
  }
  EXPECT_THAT(pipeline_refusal([] { parse_pp_layers("3,x,2"); }), HasSubstr("item 2 ('x')"));
}

TEST(PipelineStages, MeshNamesPpOutermostBesideEveryStrategy) {
  ParallelConfig p = make_parallel_config("tsp", 1, "pp=2,dp=2,tsp=2", false,
                                          TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.pp, 2);
  EXPECT_EQ(p.world(), 8);
  EXPECT_EQ(p.mesh_spec(), "pp=2,dp=2,tsp=2,tp=1");
  EXPECT_EQ(p.describe(), "pp=2 dp=2 tsp=2 zigzag");
  p.pp_layers = {3, 5};
  EXPECT_EQ(p.describe(), "pp=2 (layers 3,5) dp=2 tsp=2 zigzag");
  EXPECT_EQ(strategy_of_mesh("pp=2,dp=2,tsp=2"), "tsp");
  p = make_parallel_config("tp", 1, "pp=2,tp=2", false, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.world(), 4);
  EXPECT_EQ(p.mesh_spec(), "pp=2,dp=1,sp=1,tp=2");
  p = make_parallel_config("sp", 1, "pp=3,sp=2", false, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.pp * 10 + p.sp, 32);
  p = make_parallel_config("dp", 1, "pp=2,dp=2", false, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.world(), 4);
  // pp alone: the mesh implies dp (one replica), as dp=1 does.
  EXPECT_EQ(strategy_of_mesh("pp=4"), "dp");
  EXPECT_EQ(make_parallel_config("dp", 1, "pp=4", false, TokenLayoutKind::Zigzag).world(), 4);
  // Without stages nothing changes: the spec and the description stay as they were.
  p = make_parallel_config("tsp", 1, "dp=2,tsp=2", false, TokenLayoutKind::Zigzag);
  EXPECT_EQ(p.mesh_spec(), "dp=2,tsp=2,tp=1");
  EXPECT_EQ(p.describe(), "dp=2 tsp=2 zigzag");
  EXPECT_THAT(pipeline_refusal([] {
                make_parallel_config("single", 1, "pp=2", false, TokenLayoutKind::Zigzag);
              }),
              HasSubstr("strategy single does not use a parallel axis"));
}

TEST(PipelineStages, PpGroupJoinsTheSameCoordinatesOfEveryStage) {
  // pp=2 x dp=2 x tsp=2: a stage is 4 consecutive world ranks; world rank r's pp group is
  // {r mod 4, r mod 4 + 4}, in stage order, and its other axes stay inside its stage.
  const ParallelConfig p = make_parallel_config("tsp", 1, "pp=2,dp=2,tsp=2", false,
                                                TokenLayoutKind::Zigzag);
  comm::run_ranks(8, [&](comm::Communicator& w) {
    ParallelGroups g(w, p);
    const int r = w.rank();
    EXPECT_EQ(g.pp().size(), 2);
    EXPECT_EQ(g.pp().rank(), r / 4);
    std::vector<std::int64_t> mine{r}, stage(2), pair(2);
    g.pp().all_gather(mine, stage);
    EXPECT_EQ(stage, (std::vector<std::int64_t>{r % 4, r % 4 + 4})) << r;
    g.dp().all_gather(mine, pair);
    EXPECT_EQ(pair[0] / 4, r / 4) << r;  // dp inside the stage
    EXPECT_EQ(pair[1] / 4, r / 4) << r;
    g.tsp().all_gather(mine, pair);
    EXPECT_EQ(pair, (std::vector<std::int64_t>{r & ~1, (r & ~1) + 1})) << r;
  });
  // Without stages the mesh has no pp axis.
  comm::run_ranks(1, [&](comm::Communicator& w) {
    ParallelGroups g(w, ParallelConfig{});
    EXPECT_THROW(g.pp(), Error);
  });
}

TEST(PipelineStages, BadPipelinesAreRefusedNamingWhatToChange) {
  const ModelConfig m = parity::make_model(64, 16, 32, 2, 2, 4);  // 4 layers
  const auto refusal = [&](const ParallelConfig& p, int world) {
    return pipeline_refusal([&] { validate_plan(p, m, 16, 1, world); });
  };
  EXPECT_EQ(refusal({.pp = 4}, 4), "");  // one layer a stage
  EXPECT_EQ(refusal({.pp = 2, .pp_layers = {1, 3}}, 2), "");
  EXPECT_EQ(refusal({.pp = 2, .dp = 2, .tsp = 2}, 8), "");
  // More stages than layers.
  EXPECT_THAT(refusal({.pp = 5}, 5), HasSubstr("pp=5 pipeline stages over a model of 4 layers"));
  EXPECT_THAT(refusal({.pp = 5}, 5), HasSubstr("use pp=4 or fewer"));
  // A split of the wrong count, or not summing to L: the balanced split as the example.
  EXPECT_THAT(refusal({.pp = 2, .pp_layers = {1, 1, 2}}, 2),
              HasSubstr("--pp-layers 1,1,2 gives 3 stages but the mesh has pp=2"));
  EXPECT_THAT(refusal({.pp = 2, .pp_layers = {1, 1, 2}}, 2), HasSubstr("e.g. --pp-layers 2,2"));
  EXPECT_THAT(refusal({.pp = 3, .pp_layers = {1, 1, 1}}, 3),
              HasSubstr("--pp-layers 1,1,1 sums to 3 layers but the model has 4"));
  EXPECT_THAT(refusal({.pp = 3, .pp_layers = {1, 1, 1}}, 3), HasSubstr("e.g. --pp-layers 1,2,1"));
  EXPECT_THAT(refusal({.pp = 2, .pp_layers = {0, 4}}, 2), HasSubstr("stage 0 has 0 layers"));
  // A split without a pp axis.
  EXPECT_THAT(refusal({.pp_layers = {2, 2}}, 1), HasSubstr("but the mesh has pp=1"));
  // Axes that do not multiply to the world: pp counts.
  EXPECT_THAT(refusal({.pp = 2, .dp = 2, .tsp = 2}, 4),
              HasSubstr("the mesh pp=2,dp=2,tsp=2,tp=1 needs 8 ranks but the world has 4"));
  EXPECT_THAT(refusal({.pp = 0}, 1), HasSubstr("every mesh degree must be >= 1"));
  // Interleaving: p x v chunks, each of at least one layer; --pp-layers then counts chunks.
  EXPECT_EQ(refusal({.pp = 2, .pp_virtual = 2}, 2), "");
  EXPECT_EQ(refusal({.pp = 2, .pp_virtual = 2, .pp_layers = {1, 1, 1, 1}}, 2), "");
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = 3}, 2),
              HasSubstr("pp=2 x --pp-virtual 3 = 6 model chunks over a model of 4 layers"));
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = 3}, 2), HasSubstr("use --pp-virtual 2 or less"));
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = 0}, 2), HasSubstr("--pp-virtual 0"));
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = -1}, 2), HasSubstr("at least one model chunk"));
  EXPECT_THAT(refusal({.pp_virtual = 2}, 1), HasSubstr("interleaving needs pp=2 or more"));
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = 2, .pp_layers = {2, 2}}, 2),
              HasSubstr("--pp-layers 2,2 gives 2 chunks but pp=2 x --pp-virtual 2 has 4"));
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = 2, .pp_layers = {2, 2}}, 2),
              HasSubstr("e.g. --pp-layers 1,1,1,1"));
  EXPECT_THAT(refusal({.pp = 2, .pp_virtual = 2, .pp_layers = {1, 1, 1, 2}}, 2),
              HasSubstr("sums to 5 layers but the model has 4"));
}

TEST(PipelineStages, InterleavedChunksGoRoundTheRanks) {
  // 7 layers over pp 2 x v 2: the balanced chunks 2,2,2,1 (chunk 0 on rank 0, 1 on rank 1,
  // 2 on rank 0, 3 on rank 1).
  const ParallelConfig p{.pp = 2, .pp_virtual = 2};
  const PipelineSplit split = stage_layers(p, 7);
  ASSERT_EQ(split.chunk_count(), 4);
  ASSERT_EQ(split.chunks.size(), 4u);
  EXPECT_EQ(split.chunks[2].first, 4);
  EXPECT_EQ(split.chunks[2].count, 2);
  EXPECT_EQ(split.chunks[3].count, 1);
  EXPECT_EQ(split.chunk_of(0, 1), 2);
  EXPECT_EQ(split.chunk_of(1, 1), 3);
  EXPECT_EQ(split.layers_of(1, 0).first, 2);
  EXPECT_EQ(split.rank_of_chunk(2), 0);
  EXPECT_EQ(split.chunk_of_layer(5), 2);
  EXPECT_EQ(split.chunk_of_layer(6), 3);
  expect_tensor_stages(split, {{"model.embed_tokens.weight", 0},
                               {"model.layers.1.mlp.up_proj.weight", 0},
                               {"model.layers.3.mlp.up_proj.weight", 1},
                               {"model.layers.4.self_attn.o_proj.weight", 0},
                               {"model.layers.6.post_attention_layernorm.weight", 1},
                               {"lm_head.weight", 1}});
  EXPECT_THROW(split.layers_of(2, 0), Error);
  EXPECT_THROW(split.chunk_of_layer(7), Error);
  // pp 3 x v 2 over 6 layers: the last rank holds chunks 2 and 5 (layers 2 and 5 and the head).
  const PipelineSplit three = stage_layers({.pp = 3, .pp_virtual = 2}, 6);
  expect_tensor_stages(three, {{"model.layers.2.mlp.down_proj.weight", 2},
                               {"model.layers.3.mlp.down_proj.weight", 0},
                               {"model.norm.weight", 2}});
  EXPECT_EQ(ParallelConfig({.pp = 2, .pp_virtual = 2, .tsp = 2}).describe(),
            "pp=2 (virtual 2) dp=1 tsp=2 zigzag");
  EXPECT_EQ(ParallelConfig({.pp = 2, .pp_virtual = 2, .pp_layers = {2, 1, 1, 3}}).describe(),
            "pp=2 (virtual 2, layers 2,1,1,3) dp=1 tp=1 sp=1");
}

TEST(PipelineStages, EachStageHoldsOnlyItsTensors) {
  // 4 layers split 1,3: stage 0 the embedding and layer 0, stage 1 layers 1..3, the final norm
  // and the LM head; every other tensor is an empty block, its spec marked off the stage.
  const ModelConfig m = parity::make_model(64, 16, 32, 2, 2, 4);
  const ParallelConfig p{.pp = 2, .pp_layers = {1, 3}};
  const PipelineSplit stages = stage_layers(p, m.num_hidden_layers);
  expect_tensor_stages(stages, {{"model.embed_tokens.weight", 0},
                                {"model.layers.0.mlp.up_proj.weight", 0},
                                {"model.layers.1.input_layernorm.weight", 1},
                                {"model.layers.3.self_attn.q_proj.weight", 1},
                                {"model.norm.weight", 1},
                                {"lm_head.weight", 1}});
  std::vector<std::vector<std::int64_t>> held(2);  // elements per tensor, by stage
  comm::run_ranks(2, [&](comm::Communicator& w) {
    ParallelGroups g(w, p);
    RankModel model(m, g, 16, Recompute::None, w.tracker(), 1);
    EXPECT_EQ(model.stage(), w.rank());
    std::vector<NamedTensor> named = named_tensors(model.params());
    for (std::size_t i = 0; i < named.size(); ++i) {
      const bool mine = stage_of_tensor(named[i].name, stages) == w.rank();
      EXPECT_EQ(model.specs()[i].on_stage, mine) << named[i].name;
      EXPECT_EQ(named[i].tensor->numel() > 0, mine) << named[i].name;
      EXPECT_EQ(named_tensors(model.grads())[i].tensor->numel(), named[i].tensor->numel());
      held[static_cast<std::size_t>(w.rank())].push_back(named[i].tensor->numel());
    }
  });
  // Together the stages hold every parameter once.
  std::int64_t total = 0;
  for (const auto& stage : held) total = std::accumulate(stage.begin(), stage.end(), total);
  EXPECT_EQ(total, m.num_parameters());
}

TEST(PipelineStages, WhatStagesDoNotRunWithIsRefusedNamingIt) {
  // Tied embeddings: the one table would be needed on the first and the last stage.
  ModelConfig tied = parity::make_model(64, 16, 32, 2, 2, 4);
  tied.tie_word_embeddings = true;
  const std::string message =
      pipeline_refusal([&] { validate_plan({.pp = 2}, tied, 16, 1, 2); });
  EXPECT_THAT(message, HasSubstr("pp=2 with tie_word_embeddings"));
  EXPECT_THAT(message, HasSubstr("set tie_word_embeddings false"));
  EXPECT_EQ(pipeline_refusal([&] { validate_plan({.pp = 1}, tied, 16, 1, 1); }), "");
  // Mixture-of-experts layers run in stages (each stage its layers' balance); TSP's allgather
  // schedule refuses them with or without stages.
  ModelConfig experts = parity::make_model(64, 16, 32, 2, 2, 4);
  experts.num_local_experts = 4;
  experts.num_experts_per_tok = 2;
  EXPECT_EQ(pipeline_refusal([&] { validate_plan({.pp = 2, .tsp = 2}, experts, 16, 1, 4); }), "");
  EXPECT_EQ(pipeline_refusal([&] { validate_plan({.pp = 2, .tp = 2}, experts, 16, 1, 4); }), "");
  const std::string moe = pipeline_refusal([&] {
    validate_plan({.pp = 2, .tsp = 2, .tsp_schedule = TspSchedule::Allgather}, experts, 16, 1, 4);
  });
  EXPECT_THAT(moe, HasSubstr("(--tsp-schedule allgather) does not support them"));
}

// The orders of every rank timed on a slot clock: a chunk's forward takes `f` slots, its
// backward `b`; a pass starts when its rank is free and its input is there (the previous
// chunk's forward, the next chunk's backward, or on the last chunk its own forward).
struct PipelineTiming {
  int step_slots = 0;
  std::vector<int> busy, most_in_flight;
  std::vector<std::string> rows;  // one per rank, as docs/strategies.md draws it (f = b = 1)
};
PipelineTiming time_pipeline(int p, int v, int m, int f, int b) {
  const PipelineSplit split{.stages = p, .virtual_stages = v, .chunks = {}};
  std::vector<std::vector<PipelineStep>> order;
  for (int s = 0; s < p; ++s) order.push_back(pipeline_order(p, v, s, m));
  const int chunks = p * v;
  const auto at = [m](int chunk, int n) { return static_cast<std::size_t>(chunk * m + n); };
  std::vector<int> fdone(static_cast<std::size_t>(chunks * m), -1), bdone = fdone;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<int> free_at(static_cast<std::size_t>(p), 0), in_flight(static_cast<std::size_t>(p), 0);
  PipelineTiming t;
  t.busy.assign(static_cast<std::size_t>(p), 0);
  t.most_in_flight.assign(static_cast<std::size_t>(p), 0);
  std::vector<std::vector<std::string>> cells(static_cast<std::size_t>(p));
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < p; ++s) {
      const std::size_t us = static_cast<std::size_t>(s);
      if (next[us] == order[us].size()) continue;
      const PipelineStep step = order[us][next[us]];
      const int c = split.chunk_of(s, step.chunk);
      const int ready = step.backward ? (c == chunks - 1 ? fdone[at(c, step.micro)]
                                                         : bdone[at(c + 1, step.micro)])
                                      : (c == 0 ? 0 : fdone[at(c - 1, step.micro)]);
      if (ready < 0) continue;
      const int start = std::max(free_at[us], ready), slots = step.backward ? b : f;
      (step.backward ? bdone : fdone)[at(c, step.micro)] = start + slots;
      cells[us].resize(static_cast<std::size_t>(start), v == 1 ? ".." : "...");
      std::string cell(1, step.backward ? 'B' : 'F');
      cell += std::to_string(step.micro);
      if (v > 1) cell += static_cast<char>('a' + step.chunk);  // F3b: micro-batch 3, chunk 1
      cells[us].insert(cells[us].end(), static_cast<std::size_t>(slots), cell);
      free_at[us] = start + slots;
      t.busy[us] += slots;
      in_flight[us] += step.backward ? -1 : 1;
      t.most_in_flight[us] = std::max(t.most_in_flight[us], in_flight[us]);
      ++next[us];
      progressed = true;
    }
  }
  for (int s = 0; s < p; ++s) {
    const std::size_t us = static_cast<std::size_t>(s);
    EXPECT_EQ(next[us], order[us].size()) << "stage " << s << " stalled";  // no deadlock
    t.step_slots = std::max(t.step_slots, free_at[us]);
  }
  for (std::vector<std::string>& c : cells) {
    c.resize(static_cast<std::size_t>(t.step_slots), v == 1 ? ".." : "...");
    std::string row;
    for (const std::string& cell : c) {
      if (!row.empty()) row += ' ';
      row += cell;
    }
    t.rows.push_back(row);
  }
  return t;
}

TEST(PipelineSchedule, EveryOrderRunsEachChunkPassOnceForwardBeforeBackward) {
  for (int p = 1; p <= 5; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int m = 1; m <= 8; ++m) {
        if (v > 1 && (p == 1 || m % p != 0)) continue;
        for (int s = 0; s < p; ++s) {
          const std::vector<PipelineStep> order = pipeline_order(p, v, s, m);
          ASSERT_EQ(std::ssize(order), 2 * m * v);
          // [chunk][micro-batch]: the position of its forward and of its backward.
          std::vector<std::vector<int>> forward_at(static_cast<std::size_t>(v),
                                                   std::vector<int>(static_cast<std::size_t>(m), -1));
          std::vector<std::vector<int>> backward_at = forward_at;
          for (int i = 0; i < 2 * m * v; ++i) {
            const PipelineStep& st = order[static_cast<std::size_t>(i)];
            ASSERT_TRUE(st.chunk >= 0 && st.chunk < v && st.micro >= 0 && st.micro < m);
            int& slot = (st.backward ? backward_at : forward_at)[static_cast<std::size_t>(
                st.chunk)][static_cast<std::size_t>(st.micro)];
            EXPECT_EQ(slot, -1) << "a pass twice";
            slot = i;
          }
          for (std::size_t k = 0; k < forward_at.size(); ++k)
            for (std::size_t n = 0; n < forward_at[k].size(); ++n) {
              EXPECT_GE(forward_at[k][n], 0);
              EXPECT_GT(backward_at[k][n], forward_at[k][n]);
              if (n > 0) {  // each chunk's micro-batches in order, both ways
                EXPECT_GT(forward_at[k][n], forward_at[k][n - 1]);
                EXPECT_GT(backward_at[k][n], backward_at[k][n - 1]);
              }
            }
          // On the last rank the head's forward is followed at once by its backward (the head
          // keeps one micro-batch's state: block_ops.h).
          if (s == p - 1)
            for (std::size_t i = 0; i + 1 < order.size(); ++i)
              if (!order[i].backward && order[i].chunk == v - 1) {
                EXPECT_TRUE(order[i + 1].backward && order[i + 1].micro == order[i].micro &&
                            order[i + 1].chunk == v - 1)
                    << p << " " << v << " " << m;
              }
        }
      }
  EXPECT_THROW(pipeline_order(2, 1, 2, 1), Error);
  EXPECT_THROW(pipeline_order(2, 1, 0, 0), Error);
  EXPECT_THROW(pipeline_order(2, 0, 0, 2), Error);
}

TEST(PipelineSchedule, SlotClockGivesTheBubbleAndInFlightFormulas) {
  // 1F1B and interleaved with 2 and 3 chunks a rank; m < p, m = p, m > p (interleaved: every
  // multiple of p up to 8); a backward of one and of two slots.
  for (int p = 1; p <= 5; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int m = 1; m <= 8; ++m) {
        if (v > 1 && (p == 1 || m % p != 0)) continue;
        for (const int b : {1, 2}) {
          const PipelineTiming t = time_pipeline(p, v, m, 1, b);
          EXPECT_EQ(t.step_slots, (m * v + p - 1) * (1 + b)) << p << " " << v << " " << m;
          for (int s = 0; s < p; ++s) {
            const std::size_t us = static_cast<std::size_t>(s);
            const double idle = 1.0 - static_cast<double>(t.busy[us]) / t.step_slots;
            EXPECT_NEAR(idle, pipeline_bubble(p, v, m), 1e-12) << p << " " << v << " " << m;
            const double idle_of_busy =
                static_cast<double>(t.step_slots - t.busy[us]) / t.busy[us];
            EXPECT_NEAR(idle_of_busy, pipeline_bubble_of_busy(p, v, m), 1e-12);
            EXPECT_EQ(t.most_in_flight[us], pipeline_in_flight(p, v, s, m))
                << p << " " << v << " " << m << " " << s;
          }
        }
      }
  EXPECT_EQ(pipeline_in_flight(4, 1, 0, 6), 4);  // min(p - s, m) for 1F1B
  EXPECT_EQ(pipeline_in_flight(4, 1, 3, 6), 1);
  // The docs' diagrams (docs/strategies.md, "Pipeline stages").
  const PipelineTiming t = time_pipeline(4, 1, 6, 1, 1);
  EXPECT_EQ(t.rows, (std::vector<std::string>{
                        "F0 F1 F2 F3 .. .. .. B0 F4 B1 F5 B2 .. B3 .. B4 .. B5",
                        ".. F0 F1 F2 .. .. B0 F3 B1 F4 B2 F5 B3 .. B4 .. B5 ..",
                        ".. .. F0 F1 .. B0 F2 B1 F3 B2 F4 B3 F5 B4 .. B5 .. ..",
                        ".. .. .. F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 .. .. .."}));
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 1, 6), 3.0 / 9.0);
  // Interleaved, p = 4 x 2 chunks (a: the rank's first, b: its second), m = 4: 11 chunk
  // pass slots of forward and backward where 1F1B's 4 x 1 chunks take 7 of twice the length.
  const PipelineTiming interleaved = time_pipeline(4, 2, 4, 1, 1);
  EXPECT_EQ(interleaved.rows,
            (std::vector<std::string>{
                "F0a F1a F2a F3a F0b F1b F2b F3b ... ... ... B0b ... B1b ... B2b ... B3b B0a B1a B2a B3a",
                "... F0a F1a F2a F3a F0b F1b F2b F3b ... B0b ... B1b ... B2b ... B3b B0a B1a B2a B3a ...",
                "... ... F0a F1a F2a F3a F0b F1b F2b B0b F3b B1b ... B2b ... B3b B0a B1a B2a B3a ... ...",
                "... ... ... F0a F1a F2a F3a F0b B0b F1b B1b F2b B2b F3b B3b B0a B1a B2a B3a ... ... ..."}));
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 2, 4), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_of_busy(4, 2, 4), 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_of_busy(4, 1, 4), 3.0 / 4.0);
}

TEST(PipelineSchedule, InterleavingNeedsMicroBatchesInGroupsOfTheStages) {
  EXPECT_EQ(pipeline_refusal([] { check_pipeline_schedule(2, 2, 4); }), "");
  EXPECT_EQ(pipeline_refusal([] { check_pipeline_schedule(3, 1, 4); }), "");  // 1F1B: any m
  const std::string m = pipeline_refusal([] { check_pipeline_schedule(3, 2, 4); });
  EXPECT_THAT(m, HasSubstr("--grad-accum 4 under pp=3 with --pp-virtual 2"));
  EXPECT_THAT(m, HasSubstr("must be a multiple of 3; use --grad-accum 3"));
  EXPECT_THAT(pipeline_refusal([] { check_pipeline_schedule(4, 2, 2); }),
              HasSubstr("use --grad-accum 4"));
}

}  // namespace
}  // namespace origami::parallel
