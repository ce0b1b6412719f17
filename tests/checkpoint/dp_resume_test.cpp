// A resume under another dp keeps the global batch (train/batch_size.h): the checkpoint records
// the global batch with its split, the resumed run adjusts what the user did not fix (saying
// so) and continues the data exactly, or refuses with the reason and a value that works.
#include <cmath>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../sanitizers.h"
#include "ckpt_util.h"
#include "origami/core/error.h"
#include "origami/train/batch_size.h"

namespace origami::ckpt_test {
namespace {

using ::testing::HasSubstr;

// dp=2 x tsp=2 at micro-batch 1 x grad-accum 2 (global batch 4), saved after step 3, resumed
// under tsp=2 alone and on one device: grad-accum becomes 4 and steps 4 and 5 have the
// uninterrupted run's losses (the same sequences; float32 rounding of the other layout).
TEST(DpResume, AnotherDpKeepsTheGlobalBatchAndTheDataCursor) {
  const std::string a = fresh_dir("dp_from");
  TrainOptions oa = tiny_options({"tsp", 1, "dp=2,tsp=2"}, 5);
  oa.batch = 1;
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  ASSERT_EQ(ra.steps.size(), 5u);
  const nlohmann::json run = ckpt::read_index(ckpt::checkpoint_dir(a, 3)).at("run");
  EXPECT_EQ(run.at("global_batch"), 4);
  EXPECT_EQ(run.at("batch"), 1);
  EXPECT_EQ(run.at("dp"), 2);
  EXPECT_EQ(run.at("grad_accum"), 2);
  EXPECT_EQ(run.at("sequences_drawn"), 12);
  for (const Layout& to : {Layout{"tsp", 2, ""}, Layout{"single", 1, ""}}) {
    const std::string b = fresh_dir("dp_to");
    TrainOptions ob = tiny_options(to, 5);
    ob.batch = 1;
    ob.batch_fixed = true;  // as --micro-batch 1: only grad-accum may follow
    ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
    ob.checkpoint.save_dir = b;
    std::vector<std::string> lines;
    const TrainResult rb = quiet_train(ob, &lines);
    EXPECT_TRUE(said(lines, "--grad-accum 4 keeps the saved global batch 4")) << to.name();
    ASSERT_EQ(rb.steps.size(), 2u) << to.name();
    for (std::size_t k = 0; k < 2; ++k) {
      const double want = ra.steps[3 + k].loss;
      EXPECT_NEAR(rb.steps[k].loss, want, 2e-5 * std::abs(want)) << to.name() << " step " << 4 + k;
      EXPECT_EQ(rb.steps[k].tokens, ra.steps[3 + k].tokens);
    }
    const nlohmann::json saved = ckpt::read_index(ckpt::checkpoint_dir(b, 5)).at("run");
    EXPECT_EQ(saved.at("global_batch"), 4);
    EXPECT_EQ(saved.at("dp"), 1);
    EXPECT_EQ(saved.at("grad_accum"), 4);
    EXPECT_EQ(saved.at("sequences_drawn"), 20);
    std::filesystem::remove_all(b);
  }
  // Back to dp=2 x tp=2 from one device's checkpoint: micro-batch 2 x dp 2 x grad-accum 1.
  const std::string c = fresh_dir("dp_back");
  TrainOptions oc = tiny_options({"tp", 1, "dp=2,tp=2"}, 5);
  oc.batch = 2;
  oc.batch_fixed = true;
  oc.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  std::vector<std::string> lines;
  const TrainResult rc = quiet_train(oc, &lines);
  EXPECT_TRUE(said(lines, "--grad-accum 1 keeps the saved global batch 4"));
  ASSERT_EQ(rc.steps.size(), 2u);
  EXPECT_NEAR(rc.steps[0].loss, ra.steps[3].loss, 2e-5 * std::abs(ra.steps[3].loss));
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(c);
}

// --shard-optimizer (ZeRO-1) saves the unsharded checkpoint: the moments are gathered over dp
// before writing. A dp 2 run saves bitwise what the unsharded dp 2 run saves; its checkpoint
// resumes unsharded at dp 2 (bitwise the uninterrupted run), on one device and sharded at dp 4
// (float32 rounding of the other layout), and an unsharded checkpoint resumes sharded.
TEST(DpResume, ShardedOptimizerSavesTheUnshardedCheckpointAndReshardsAcrossDp) {
  auto options = [](const Layout& l, bool shard, std::int64_t batch) {
    TrainOptions o = tiny_options(l, 4);
    o.batch = batch;
    o.batch_fixed = true;  // global batch 4: grad-accum follows dp
    o.grad_accum = 4 / (batch * (l.degree > 1 ? l.degree : 1));
    o.shard_optimizer = shard;
    return o;
  };
  const Layout dp2{"dp", 2, ""};
  const std::string whole_dir = fresh_dir("zero1_whole"), sharded_dir = fresh_dir("zero1_sharded");
  TrainOptions ow = options(dp2, false, 2);
  ow.checkpoint.save_dir = whole_dir;
  ow.checkpoint.save_every = 2;
  const TrainResult whole = quiet_train(ow);
  TrainOptions os = options(dp2, true, 2);
  os.checkpoint.save_dir = sharded_dir;
  os.checkpoint.save_every = 2;
  std::vector<std::string> lines;
  const TrainResult sharded = quiet_train(os, &lines);
  EXPECT_TRUE(said(lines, "AdamW state sharded over dp 2"));
  ASSERT_EQ(whole.steps.size(), 4u);
  ASSERT_EQ(sharded.steps.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(sharded.steps[k].loss, whole.steps[k].loss) << k;
  expect_same_tensors(ckpt::checkpoint_dir(whole_dir, 2), ckpt::checkpoint_dir(sharded_dir, 2));

  struct Resume {
    Layout to;
    bool shard;
    std::int64_t batch;
    const std::string* from;
    bool bitwise;  // the same layout as the uninterrupted run
  };
  std::vector<Resume> resumes = {{dp2, false, 2, &sharded_dir, true},
                                 {dp2, true, 2, &whole_dir, true},
                                 {{"single", 1, ""}, true, 2, &sharded_dir, false}};
#ifndef ORIGAMI_TESTS_SANITIZED  // (the sanitized build resumes at dp 1 and 2 only)
  resumes.push_back({{"dp", 4, ""}, true, 1, &sharded_dir, false});
#endif
  for (const Resume& r : resumes) {
    const std::string name = r.to.name() + (r.shard ? " sharded" : " unsharded");
    TrainOptions o = options(r.to, r.shard, r.batch);
    o.checkpoint.resume = ckpt::checkpoint_dir(*r.from, 2);
    const std::string out = fresh_dir("zero1_resumed");
    o.checkpoint.save_dir = out;
    const TrainResult res = quiet_train(o);
    ASSERT_EQ(res.steps.size(), 2u) << name;
    for (std::size_t k = 0; k < 2; ++k) {
      const double want = whole.steps[2 + k].loss;
      if (r.bitwise)
        EXPECT_EQ(res.steps[k].loss, want) << name << " step " << 3 + k;
      else
        EXPECT_NEAR(res.steps[k].loss, want, 2e-5 * std::abs(want)) << name << " step " << 3 + k;
    }
    if (r.bitwise)
      expect_same_tensors(ckpt::checkpoint_dir(whole_dir, 4), ckpt::checkpoint_dir(out, 4));
    std::filesystem::remove_all(out);
  }
  std::filesystem::remove_all(whole_dir);
  std::filesystem::remove_all(sharded_dir);
}

// At dp 1 there is nothing to shard over: the flag changes nothing, and the run says so once.
TEST(DpResume, ShardOptimizerAtDpOneSaysItChangesNothing) {
  TrainOptions o = tiny_options({"tsp", 2, ""}, 1);
  o.shard_optimizer = true;
  std::vector<std::string> lines;
  const TrainResult flagged = quiet_train(o, &lines);
  o.shard_optimizer = false;
  const TrainResult plain = quiet_train(o);
  int said_once = 0;
  for (const std::string& s : lines) said_once += s.find("changes nothing at dp 1") != std::string::npos;
  EXPECT_EQ(said_once, 1);
  ASSERT_EQ(flagged.steps.size(), 1u);
  EXPECT_EQ(flagged.steps[0].loss, plain.steps[0].loss);
  EXPECT_EQ(flagged.memory.peak, plain.memory.peak);
}

// What cannot keep the global batch is refused before any work, saying why and what works.
TEST(DpResume, RefusesWhatCannotKeepTheGlobalBatch) {
  const std::string a = fresh_dir("dp_refuse");
  TrainOptions oa = tiny_options({"single", 1, ""}, 2);  // micro-batch 4 x grad-accum 2 = 8
  oa.checkpoint.save_dir = a;
  quiet_train(oa);
  const std::string saved = ckpt::checkpoint_dir(a, 2);
  auto refusal = [&](TrainOptions o) {
    o.steps = 3;
    o.checkpoint.resume = saved;
    try {
      quiet_train(o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no refusal");
  };
  // dp 3 does not divide 8.
  EXPECT_THAT(refusal(tiny_options({"dp", 3, ""}, 3)),
              HasSubstr("8 sequences do not split over dp 3"));
  // Both halves of the split fixed, and they make 2 x 2 x 1 = 4.
  TrainOptions both = tiny_options({"dp", 2, ""}, 3);
  both.batch = 2;
  both.grad_accum = 1;
  both.batch_fixed = both.grad_accum_fixed = true;
  const std::string b = refusal(both);
  EXPECT_THAT(b, HasSubstr("saved with global batch 8 (micro-batch 4 x dp 1 x grad-accum 2)"));
  EXPECT_THAT(b, HasSubstr("--micro-batch x --grad-accum = 4"));
  // A --global-batch other than the saved one.
  TrainOptions global = tiny_options({"dp", 2, ""}, 3);
  global.global_batch = 16;
  EXPECT_THAT(refusal(global), HasSubstr("give --global-batch 8"));
  // A fixed micro-batch that does not divide 8 / dp.
  TrainOptions micro = tiny_options({"dp", 2, ""}, 3);
  micro.batch = 3;
  micro.batch_fixed = true;
  EXPECT_THAT(refusal(micro), HasSubstr("--micro-batch 3 does not divide 8 / dp 2 = 4"));
  std::filesystem::remove_all(a);
}

// --global-batch resolved against the split (no run needed: the rules themselves).
TEST(GlobalBatch, DerivesWhatIsNotFixedAndRefusesContradictions) {
  TrainOptions o;
  o.batch = 2;
  o.batch_fixed = true;
  o.global_batch = 16;
  EXPECT_THAT(resolve_global_batch(o, 4), HasSubstr("--grad-accum 2"));
  EXPECT_EQ(o.grad_accum, 2);
  EXPECT_TRUE(o.global_batch_fixed);

  o = TrainOptions{};
  o.global_batch = 12;  // neither fixed: the micro-batch follows, grad-accum stays 1
  EXPECT_THAT(resolve_global_batch(o, 3), HasSubstr("--micro-batch 4 per replica"));
  EXPECT_EQ(o.batch, 4);
  EXPECT_EQ(o.grad_accum, 1);

  o = TrainOptions{};
  o.grad_accum = 3;
  o.grad_accum_fixed = true;
  o.global_batch = 12;
  resolve_global_batch(o, 2);
  EXPECT_EQ(o.batch, 2);

  o = TrainOptions{};  // nothing given: global = 8 x dp 2 x 1
  EXPECT_EQ(resolve_global_batch(o, 2), "");
  EXPECT_EQ(o.global_batch, 16);
  EXPECT_FALSE(o.global_batch_fixed);

  auto refused = [](TrainOptions t, int dp) {
    try {
      resolve_global_batch(t, dp);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no refusal");
  };
  TrainOptions all;
  all.batch = 2;
  all.grad_accum = 2;
  all.batch_fixed = all.grad_accum_fixed = true;
  all.global_batch = 10;
  EXPECT_THAT(refused(all, 2), HasSubstr("--global-batch 10 contradicts --micro-batch 2 x dp 2 x "
                                         "--grad-accum 2 = 8"));
  EXPECT_THAT(refused(all, 2), HasSubstr("or --global-batch 8"));
  TrainOptions micro;
  micro.batch = 3;
  micro.batch_fixed = true;
  micro.global_batch = 10;
  EXPECT_THAT(refused(micro, 2), HasSubstr("use --global-batch 12"));
  TrainOptions split;
  split.global_batch = 5;
  EXPECT_THAT(refused(split, 2), HasSubstr("does not split over dp 2 x --grad-accum 1 = 2: use "
                                           "--global-batch 6"));
  TrainOptions negative;
  negative.global_batch = -4;
  EXPECT_THAT(refused(negative, 1), HasSubstr("--global-batch must be at least 1"));
}

}  // namespace
}  // namespace origami::ckpt_test
