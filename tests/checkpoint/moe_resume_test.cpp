// Mixture of experts (docs/moe.md): a run under the expert schedule (tsp 2, whole experts per
// rank) saved after step 3 resumes under the weight ring at tsp 4 (every expert sharded 1/4)
// and under the mesh (tp 2: every expert sharded 1/2 over tp; the degree-1 mesh of
// `train --strategy single`), and on LlamaModel loaded from the checkpoint and stepped by
// train_step on the loop's own batches, equal to the uninterrupted run: losses, gradient norms
// and the expert load of steps 4 and 5. The same run checks the load in the --metrics lines
// and the log. And a run in pipeline stages (pp 2 x tsp 2, the expert schedule) saved after
// step 3 resumes on the degree-1 mesh and in other stages (pp 2 x tp 2).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "ckpt_util.h"
#include "origami/data/prefetch.h"
#include "origami/parallel/shard_spec.h"

namespace origami::ckpt_test {
namespace {

TrainOptions moe_options(const Layout& l, const std::string& schedule, std::int64_t steps) {
  TrainOptions o = tiny_options(l, steps);
  o.model.num_local_experts = 4;  // divisible by tsp 2 (the expert schedule)
  o.model.num_experts_per_tok = 2;
  o.model.router_aux_loss_coef = 0.1;  // large enough that the balance moves the router
  o.moe_schedule = schedule;
  return o;
}

// Different layouts sum in different orders: float32 rounding only (reshard_test's bounds).
void expect_same_step(const StepStats& got, const StepStats& want, const std::string& where) {
  EXPECT_EQ(got.step, want.step) << where;
  EXPECT_NEAR(got.loss, want.loss, 2e-5 * std::abs(want.loss)) << where << " step " << want.step;
  EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-4 * want.grad_norm) << where;
  EXPECT_EQ(got.moe.tokens_per_expert, want.moe.tokens_per_expert) << where;
  EXPECT_EQ(got.moe.dropped, want.moe.dropped) << where;
}

// Steps [first, last] of `o`'s run on one device from checkpoint `dir`.
std::vector<StepStats> one_device_steps(const TrainOptions& o, const std::string& dir,
                                        std::int64_t first, std::int64_t last) {
  MemoryTracker tracker("one device");
  const ModelConfig config = model_for_run(o.model, o.seq);
  LlamaModel model(config, tracker, o.seed);
  AdamW optimizer(model.params(), tracker,
                  {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = 1e-8f,
                   .weight_decay = o.weight_decay});
  const std::vector<parallel::ShardSpec> specs = parallel::make_shard_specs(config, 1, 0);
  ckpt::load(dir, o.model, {&specs, &model.params(), &optimizer});
  const data::TokenDataset dataset = data::open_for_training(
      o.data_path, data::data_options(o.data_dtype, o.data_order), o.model.vocab_size, o.seq);
  data::BatchPrefetcher batches(dataset, o.seed,
                                {.batch = o.batch, .seq = o.seq, .per_step = o.grad_accum,
                                 .first_row = 0, .rows = o.batch},
                                first, last, tracker);
  std::vector<StepStats> steps;
  for (std::int64_t t = first; t <= last; ++t) {
    const data::BatchPrefetcher::Step mine = batches.next();
    std::vector<TokenBatch> micro;
    for (const data::Batch& b : mine.micro)
      micro.push_back({o.batch, o.seq, b.input_ids.data<std::int32_t>(),
                       b.labels.data<std::int32_t>()});
    steps.push_back(train_step(model, optimizer, micro,
                               learning_rate(t, o.steps, o.warmup, o.lr, o.min_lr_ratio),
                               o.max_grad_norm));
  }
  return steps;
}

TEST(MoeResume, ExpertScheduleResumesUnderTheRingAndOnOneDevice) {
  const std::string a = fresh_dir("moe_expert");
  TrainOptions oa = moe_options({"tsp", 2, ""}, "expert", 5);
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  oa.metrics_path = a + "/metrics.jsonl";
  oa.log_every = 2;
  std::vector<std::string> lines;
  const TrainResult ra = quiet_train(oa, &lines);
  ASSERT_EQ(ra.steps.size(), 5u);
  // Every token of the step's micro-batches (dp 1), k assignments in every layer.
  const std::int64_t assignments = oa.batch * oa.grad_accum * oa.seq *
                                   oa.model.num_experts_per_tok * oa.model.num_hidden_layers;

  // The metrics: each step's load, summing to every assignment, and its imbalance.
  std::ifstream in(oa.metrics_path);
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ASSERT_LT(n, ra.steps.size());
    const nlohmann::json j = nlohmann::json::parse(line);
    const auto tokens = j.at("moe_tokens_per_expert").get<std::vector<std::int64_t>>();
    const StepStats& s = ra.steps[n++];
    EXPECT_EQ(tokens, s.moe.tokens_per_expert) << "step " << s.step;
    EXPECT_EQ(j.at("moe_dropped").get<std::int64_t>(), 0);  // dropless under TSP
    std::int64_t sum = 0, most = 0;
    for (const std::int64_t t : tokens) {
      sum += t;
      most = std::max(most, t);
    }
    EXPECT_EQ(sum, assignments) << "step " << s.step;
    EXPECT_DOUBLE_EQ(j.at("moe_imbalance").get<double>(),
                     static_cast<double>(most) / (static_cast<double>(sum) / 4.0));
  }
  EXPECT_EQ(n, ra.steps.size());
  std::size_t load_lines = 0;  // steps 1, 2, 4 and the last
  for (const std::string& s : lines) load_lines += s.find("experts: tokens [") != std::string::npos;
  EXPECT_EQ(load_lines, 4u);

  // tsp 4, the weight ring.
  TrainOptions ob = moe_options({"tsp", 4, ""}, "ring", 5);
  ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  const TrainResult rb = quiet_train(ob);
  ASSERT_EQ(rb.steps.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) expect_same_step(rb.steps[k], ra.steps[3 + k], "tsp 4 ring");

  // The mesh: tp 2 and the degree-1 mesh (docs/moe.md "The mesh strategies").
  for (const Layout& mesh : {Layout{"tp", 2, ""}, Layout{"single", 1, ""}}) {
    TrainOptions oc = moe_options(mesh, "ring", 5);
    oc.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
    const TrainResult rc = quiet_train(oc);
    ASSERT_EQ(rc.steps.size(), 2u) << mesh.name();
    for (std::size_t k = 0; k < 2; ++k)
      expect_same_step(rc.steps[k], ra.steps[3 + k], mesh.name());
  }

  // LlamaModel.
  const std::vector<StepStats> one = one_device_steps(oa, ckpt::checkpoint_dir(a, 3), 4, 5);
  for (std::size_t k = 0; k < 2; ++k) expect_same_step(one[k], ra.steps[3 + k], "one device");
  std::filesystem::remove_all(a);
}

// docs/moe.md "Pipeline stages": each stage writes its own layers' experts (the expert
// schedule's whole experts by their owners); the checkpoint loads without stages and under
// another mesh in stages, and gives the uninterrupted run's steps 4 and 5 (two micro-batches
// in flight a step: the aux loss and the expert load summed over the stages).
TEST(MoeResume, PipelineStagesResumeOnOneRankAndInOtherStages) {
  const std::string a = fresh_dir("moe_pp");
  TrainOptions oa = moe_options({"tsp", 1, "pp=2,tsp=2"}, "expert", 5);
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  ASSERT_EQ(ra.steps.size(), 5u);
  for (const Layout& l : {Layout{"single", 1, ""}, Layout{"tp", 1, "pp=2,tp=2"}}) {
    TrainOptions ob = moe_options(l, "ring", 5);
    ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
    const TrainResult rb = quiet_train(ob);
    ASSERT_EQ(rb.steps.size(), 2u) << l.name();
    for (std::size_t k = 0; k < 2; ++k) expect_same_step(rb.steps[k], ra.steps[3 + k], l.name());
  }
  std::filesystem::remove_all(a);
}

}  // namespace
}  // namespace origami::ckpt_test
