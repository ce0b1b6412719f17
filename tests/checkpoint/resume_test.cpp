// Exact resume: N steps, save, M more steps == N + M steps without stopping, bit for bit
// (every loss, every parameter and AdamW moment), under every strategy and pipeline stages,
// and under --precision bf16 (the checkpoint holds the fp32 master weights; the bf16 compute
// copy is rounded from them after the load); and a replicated tensor is written once.
#include <filesystem>

#include <gtest/gtest.h>

#include "ckpt_util.h"

namespace origami::ckpt_test {
namespace {

class ExactResume : public ::testing::TestWithParam<Layout> {};

TEST_P(ExactResume, StopSaveResumeEqualsUninterrupted) {
  const Layout l = GetParam();
  const std::string a = fresh_dir("a_" + l.name()), b = fresh_dir("b_" + l.name());
  // Run A: 5 steps, checkpoints after steps 3 and 5.
  TrainOptions oa = tiny_options(l, 5);
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  ASSERT_EQ(ra.steps.size(), 5u);
  ASSERT_TRUE(ckpt::is_complete(ckpt::checkpoint_dir(a, 3)));
  ASSERT_TRUE(ckpt::is_complete(ckpt::checkpoint_dir(a, 5)));
  // Run B: resumes A's step 3 and runs steps 4 and 5.
  TrainOptions ob = tiny_options(l, 5);
  ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  ob.checkpoint.save_dir = b;
  std::vector<std::string> lines;
  const TrainResult rb = quiet_train(ob, &lines);
  ASSERT_EQ(rb.steps.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(rb.steps[k].step, ra.steps[3 + k].step);
    EXPECT_EQ(rb.steps[k].loss, ra.steps[3 + k].loss) << "step " << rb.steps[k].step;
    EXPECT_EQ(rb.steps[k].grad_norm, ra.steps[3 + k].grad_norm);
    EXPECT_EQ(rb.steps[k].lr, ra.steps[3 + k].lr);
  }
  expect_same_tensors(ckpt::checkpoint_dir(a, 5), ckpt::checkpoint_dir(b, 5));
  bool said = false;
  for (const std::string& s : lines) said = said || s.find("resumed from") != std::string::npos;
  EXPECT_TRUE(said);
  // The index records the run state the loop needs.
  const nlohmann::json idx = ckpt::read_index(ckpt::checkpoint_dir(a, 3));
  EXPECT_EQ(idx.at("step"), 3);
  EXPECT_EQ(idx.at("run").at("optimizer_steps"), 3);
  EXPECT_EQ(idx.at("run").at("batches_drawn"), 6);
  EXPECT_EQ(idx.at("run").at("lr_schedule").at("step"), 3);
  EXPECT_EQ(idx.at("run").at("precision"), l.precision);
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ExactResume,
                         ::testing::Values(Layout{"single", 1, ""}, Layout{"dp", 2, ""},
                                           Layout{"tp", 2, ""}, Layout{"tpsp", 2, ""},
                                           Layout{"sp", 2, ""}, Layout{"tp", 1, "dp=2,tp=2"},
                                           Layout{"tp", 1, "tp=2,sp=2"}, Layout{"tsp", 2, ""},
                                           Layout{"tsp", 1, "dp=2,tsp=2"},
                                           Layout{"tsp", 1, "pp=2,tsp=2"},
                                           Layout{"single", 1, "", "bf16"},
                                           Layout{"dp", 2, "", "bf16"},
                                           Layout{"tp", 2, "", "bf16"},
                                           Layout{"tsp", 2, "", "bf16"},
                                           Layout{"tsp", 1, "pp=2,tsp=2", "bf16"}),
                         [](const auto& info) {
                           std::string n = info.param.name();
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// A replicated block is written once: under dp 2 every tensor has one block, from rank 0;
// under tp 2 the RMSNorm weights (replicated on tp) have one block, the projections two.
TEST(CheckpointLayout, ReplicatedTensorsWrittenOnce) {
  const std::string d = fresh_dir("dp");
  TrainOptions o = tiny_options({"dp", 2, ""}, 1);
  o.checkpoint.save_dir = d;
  quiet_train(o);
  const std::string c = ckpt::checkpoint_dir(d, 1);
  EXPECT_TRUE(std::filesystem::exists(c + "/rank-00000.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(c + "/rank-00001.safetensors"));
  const nlohmann::json index = ckpt::read_index(c);
  for (const auto& [name, info] : index.at("tensors").items())
    EXPECT_EQ(info.at("blocks").size(), 1u) << name;

  const std::string t = fresh_dir("tp");
  o = tiny_options({"tp", 2, ""}, 1);
  o.checkpoint.save_dir = t;
  quiet_train(o);
  const nlohmann::json ti = ckpt::read_index(ckpt::checkpoint_dir(t, 1)).at("tensors");
  EXPECT_EQ(ti.at("model.norm.weight").at("blocks").size(), 1u);
  EXPECT_EQ(ti.at("optimizer.exp_avg.model.layers.0.input_layernorm.weight").at("blocks").size(),
            1u);
  EXPECT_EQ(ti.at("model.layers.1.self_attn.q_proj.weight").at("blocks").size(), 2u);
  EXPECT_EQ(ti.at("model.layers.1.self_attn.o_proj.weight").at("blocks").at(1).at("offset"),
            nlohmann::json({0, 24}));
  EXPECT_EQ(ti.at("lm_head.weight").at("shape"), nlohmann::json({256, 48}));
  std::filesystem::remove_all(d);
  std::filesystem::remove_all(t);
}

}  // namespace
}  // namespace origami::ckpt_test
