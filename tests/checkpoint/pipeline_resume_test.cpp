// Pipeline stages (pp) save and load the checkpoint every other layout does: each stage's
// ranks write the blocks of the tensors their stage holds (ShardSpec::on_stage; the other
// stages hold empty blocks and write or read nothing of them), rank 0's index describes every
// tensor, and a stage reads only its own tensors and moments. So a pp checkpoint resumes under
// any layout, any checkpoint under pp, and the resumed run continues the uninterrupted one.
#include <cmath>
#include <filesystem>
#include <ostream>
#include <set>

#include <gtest/gtest.h>

#include "../sanitizers.h"
#include "ckpt_util.h"
#include "origami/parallel/shard_spec.h"

namespace origami::ckpt_test {
namespace {

// tiny_model with 4 layers, so that pp 4 has a layer per stage. Global batch 8 in every
// layout (micro-batch 2 x dp x grad-accum; 4 micro-batches at dp 1, so every stage of pp 4
// has work in flight).
TrainOptions staged_options(const Layout& l, bool shard_optimizer, std::int64_t steps) {
  TrainOptions o = tiny_options(l, steps);
  o.model.num_hidden_layers = 4;
  const bool dp2 = l.mesh.find("dp=2") != std::string::npos;
  o.batch = 2;
  o.grad_accum = dp2 ? 2 : 4;
  o.batch_fixed = o.grad_accum_fixed = true;
  o.shard_optimizer = shard_optimizer;
  return o;
}

// The parameters of a checkpoint read whole (the single-device layout).
ModelTensors whole_parameters(const std::string& dir, const ModelConfig& cfg,
                              MemoryTracker& tracker) {
  const std::vector<parallel::ShardSpec> specs = parallel::make_shard_specs(cfg, 1, 0);
  ModelTensors t = parallel::allocate_sharded(cfg, specs, tracker, MemCategory::Parameters);
  ckpt::load(dir, cfg, {&specs, &t, nullptr});
  return t;
}

struct Move {
  Layout from, to;
  bool shard_from = false, shard_to = false;  // --shard-optimizer (ZeRO-1) on each side
  std::string name() const {
    std::string n = from.name() + (shard_from ? "_zero1" : "") + "_to_" + to.name() +
                    (shard_to ? "_zero1" : "");
    for (char& c : n)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
  }
};

// gtest names the cases by this (ctest lists them).
void PrintTo(const Move& m, std::ostream* os) {
  *os << m.name();
}

const Layout kPp2Tsp2{"tsp", 1, "pp=2,tsp=2"}, kPp4{"dp", 1, "pp=4"}, kTsp4{"tsp", 4, ""},
    kPp2Dp2{"dp", 1, "pp=2,dp=2"};

std::vector<Move> moves() {
  std::vector<Move> v = {{kPp2Tsp2, kTsp4}, {kPp4, kPp2Tsp2}, {kPp2Dp2, kPp2Tsp2, true, false}};
#ifndef ORIGAMI_TESTS_SANITIZED  // (the sanitized build runs one move each way and ZeRO-1's)
  v.push_back({kPp2Tsp2, kPp4});
  v.push_back({kTsp4, kPp2Tsp2});
#endif
  return v;
}

class PipelineResume : public ::testing::TestWithParam<Move> {};

// Four steps of the saving layout, saved after step 2; steps 3 and 4 resumed under the other
// layout. Different layouts sum in different orders: float32 rounding apart, the resumed
// run's losses (relative 2e-5) and grad norms (1e-4) are the uninterrupted run's, and so are
// its parameters after step 4: every element within 1e-6 absolute (weights of magnitude
// <= ~0.1, RMSNorm weights near 1, after two AdamW steps of lr 1e-2; measured at most 1.2e-7).
TEST_P(PipelineResume, ContinuesTheUninterruptedRunUnderAnotherLayout) {
  const Move m = GetParam();
  const std::string a = fresh_dir("pp_from"), b = fresh_dir("pp_to");
  TrainOptions oa = staged_options(m.from, m.shard_from, 4);
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 2;
  const TrainResult ra = quiet_train(oa);
  ASSERT_EQ(ra.steps.size(), 4u);
  TrainOptions ob = staged_options(m.to, m.shard_to, 4);
  ob.checkpoint.resume = ckpt::checkpoint_dir(a, 2);
  ob.checkpoint.save_dir = b;
  const TrainResult rb = quiet_train(ob);
  ASSERT_EQ(rb.steps.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    const StepStats& want = ra.steps[2 + k];
    EXPECT_EQ(rb.steps[k].step, want.step);
    EXPECT_NEAR(rb.steps[k].loss, want.loss, 2e-5 * std::abs(want.loss)) << "step " << want.step;
    EXPECT_NEAR(rb.steps[k].grad_norm, want.grad_norm, 1e-4 * want.grad_norm)
        << "step " << want.step;
  }
  MemoryTracker tracker("pp_resume");
  ModelTensors pa = whole_parameters(ckpt::checkpoint_dir(a, 4), oa.model, tracker);
  ModelTensors pb = whole_parameters(ckpt::checkpoint_dir(b, 4), oa.model, tracker);
  const std::vector<NamedTensor> ta = named_tensors(pa), tb = named_tensors(pb);
  for (std::size_t i = 0; i < ta.size(); ++i) {
    double worst = 0;
    for (std::int64_t e = 0; e < ta[i].tensor->numel(); ++e)
      worst = std::max(
          worst, std::abs(static_cast<double>(ta[i].tensor->f32()[e]) - tb[i].tensor->f32()[e]));
    EXPECT_LE(worst, 1e-6) << ta[i].name << " differs by " << worst;
  }
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineResume, ::testing::ValuesIn(moves()),
                         [](const auto& info) { return info.param.name(); });

// Under pp 2 x tsp 2 (stage 0: ranks 0, 1; stage 1: ranks 2, 3) each tensor's blocks come
// from its stage's ranks only, and a stage-0 rank writes nothing of stage 1's tensors.
TEST(PipelineCheckpoint, EachStageWritesItsOwnTensors) {
  const std::string d = fresh_dir("pp_layout");
  TrainOptions o = staged_options(kPp2Tsp2, false, 1);
  o.checkpoint.save_dir = d;
  quiet_train(o);
  const nlohmann::json tensors = ckpt::read_index(ckpt::checkpoint_dir(d, 1)).at("tensors");
  auto files = [&](const std::string& name) {
    std::set<std::string> out;
    for (const auto& b : tensors.at(name).at("blocks")) out.insert(b.at("file").get<std::string>());
    return out;
  };
  const std::set<std::string> stage0{"rank-00000.safetensors", "rank-00001.safetensors"},
      stage1{"rank-00002.safetensors", "rank-00003.safetensors"};
  EXPECT_EQ(files("model.embed_tokens.weight"), stage0);
  EXPECT_EQ(files("optimizer.exp_avg.model.layers.1.mlp.down_proj.weight"), stage0);
  EXPECT_EQ(files("model.layers.2.self_attn.q_proj.weight"), stage1);
  EXPECT_EQ(files("optimizer.exp_avg_sq.lm_head.weight"), stage1);
  EXPECT_EQ(files("model.norm.weight"), std::set<std::string>{"rank-00002.safetensors"});
  const io::SafetensorsFile f0 =
      io::SafetensorsFile::open(ckpt::checkpoint_dir(d, 1) + "/rank-00000.safetensors");
  for (const io::SafetensorsEntry& e : f0.tensors())
    EXPECT_EQ(e.name.find("layers.2."), std::string::npos) << e.name;
  std::filesystem::remove_all(d);
}

// --init-from under pp: each stage takes its tensors of a checkpoint saved by one device, and
// the first step's loss is the one device's from the same parameters.
TEST(PipelineCheckpoint, InitFromLoadsEachStagesTensors) {
  const std::string d = fresh_dir("pp_init");
  TrainOptions o = staged_options({"single", 1, ""}, false, 2);
  o.checkpoint.save_dir = d;
  quiet_train(o);
  TrainOptions single = staged_options({"single", 1, ""}, false, 1);
  single.seed = 99;  // another initialisation, replaced by the checkpoint's parameters
  single.checkpoint.init_from = ckpt::checkpoint_dir(d, 2);
  TrainOptions staged = staged_options(kPp2Tsp2, false, 1);
  staged.seed = 99;
  staged.checkpoint.init_from = single.checkpoint.init_from;
  const TrainResult rs = quiet_train(single), rp = quiet_train(staged);
  ASSERT_EQ(rs.steps.size(), 1u);
  ASSERT_EQ(rp.steps.size(), 1u);
  EXPECT_NEAR(rp.steps[0].loss, rs.steps[0].loss, 2e-5 * std::abs(rs.steps[0].loss));
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace origami::ckpt_test
