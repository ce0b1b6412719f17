// `origami plan` as a user runs it: --json rows carry the cost model's numbers for every
// factorisation, impossible layouts are rows with the reason, bad input exits 2 with a message.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_run.h"
#include "origami/cli/plan_documents.h"
#include "origami/model/config.h"
#include "origami/plan/cost_model.h"
#include "origami/plan/predict.h"

namespace {

using ::testing::HasSubstr;

using origami::cli_test::CliRun;
using origami::cli_test::origami;
using origami::cli_test::slurp;

TEST(PlanCli, JsonRowsAreThePredictionsForEveryLayout) {
  const CliRun r = origami(
      "plan --model small --seq 256 --batch 2 --devices 4 --recompute mlp --hardware cpu --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  const auto& rows = out["rows"];
  // dp x tp x sp = 4: (1,1,4) (1,2,2)x2 (1,4,1)x2 (2,1,2) (2,2,1)x2 (4,1,1) -> 9 rows, and
  // dp x tsp: (1,4) (2,2) -> 11. The cpu preset's nodes hold 2 devices, so 4 span two and
  // --pp auto searches pipelines too: pp 2 over the 5 layouts of 2 devices (dp, tp, tp-sp, sp,
  // tsp) and pp 4 of one device each -> 17.
  ASSERT_EQ(rows.size(), 17u);
  const origami::ModelConfig m = origami::model_preset("small");
  origami::plan::Workload w;
  w.batch = 2;
  w.seq = 256;
  w.recompute = origami::plan::Recompute::Mlp;
  const origami::plan::Hardware hw = origami::plan::hardware_preset("cpu");
  int infeasible = 0, recommended = 0, tsp = 0, staged = 0;
  double last_rate = 1e300;
  for (const auto& row : rows) {
    const origami::plan::Mesh mesh{.pp = row["mesh"]["pp"],
                                   .dp = row["mesh"]["dp"],
                                   .tp = row["mesh"]["tp"],
                                   .sp = row["mesh"]["sp"],
                                   .tsp = row["mesh"]["tsp"],
                                   .sequence_parallel = row["sequence_parallel"]};
    EXPECT_EQ(mesh.world(), 4);
    EXPECT_EQ(row["strategy"], origami::plan::json_strategy(mesh));  // single dp tp sp tpsp tsp
    if (row["strategy"] == "tsp") ++tsp;
    if (mesh.pp > 1) {
      ++staged;
      EXPECT_EQ(row["stages"].size(), static_cast<std::size_t>(mesh.pp));
      EXPECT_GT(row["bubble"].get<double>(), 0);
    }
    if (!row["feasible"]) {  // none: each dp replica runs its own micro-batch of 2
      ADD_FAILURE() << row["error"];
      ++infeasible;
      continue;
    }
    const origami::plan::Prediction want = origami::plan::predict(m, mesh, w, hw);
    for (const auto& [key, bytes] :
         std::vector<std::pair<const char*, std::int64_t>>{
             {"parameters", want.memory.parameters},
             {"gradients", want.memory.gradients},
             {"optimizer_state", want.memory.optimizer},
             {"saved_activations", want.memory.activations},
             {"communication_buffers", want.memory.comm_buffers},
             {"workspace", want.memory.workspace},
             {"logits", want.memory.logits},
             {"total", want.memory.total()}})
      EXPECT_EQ(row["bytes"][key], bytes) << key;
    EXPECT_EQ(row["comm_bytes_sent_per_step"], want.comm_bytes_per_step);
    EXPECT_DOUBLE_EQ(row["step_s"].get<double>(), want.step_s);
    EXPECT_DOUBLE_EQ(row["bubble"].get<double>(), want.bubble);
    EXPECT_GT(row["tokens_per_s"].get<double>(), 0);
    EXPECT_GT(row["max_seq"].get<std::int64_t>(), 0);
    // Fitting rows first, highest tokens/s first (a step of dp replicas takes dp
    // micro-batches: step times of different dp are not comparable); the first is the
    // recommendation.
    EXPECT_TRUE(row["fits"]);
    EXPECT_LE(row["tokens_per_s"].get<double>(), last_rate);
    last_rate = row["tokens_per_s"].get<double>();
    if (row["recommended"]) ++recommended;
  }
  EXPECT_EQ(infeasible, 0);
  EXPECT_EQ(tsp, 3);  // tsp 4, dp 2 x tsp 2, pp 2 x tsp 2
  EXPECT_EQ(staged, 6);
  EXPECT_EQ(recommended, 1);
  EXPECT_TRUE(rows[0]["recommended"]);
  EXPECT_GT(out["longest_sequence"]["tsp"]["max_seq"].get<std::int64_t>(), 256);
  ASSERT_FALSE(out["inference"].empty());
  // Memory and decode bytes checked against the engine (tests/infer/plan_check_test.cpp), the
  // times against the inference dry run (tests/infer/planner_inference_vs_dry_run_test.cpp); the prefill's
  // weight bytes are not.
  EXPECT_TRUE(out["inference"][0]["checked"]["memory"]);
  EXPECT_TRUE(out["inference"][0]["checked"]["decode_bytes"]);
  EXPECT_TRUE(out["inference"][0]["checked"]["times"]);
  EXPECT_EQ(out["inference"][0]["checked"]["times_against"], "dry_run");
  EXPECT_FALSE(out["inference"][0]["checked"]["weight_bytes"]);
}

TEST(PlanCli, TableMarksTheRecommendationAndListsEveryLayout) {
  const CliRun r =
      origami("plan --model 7b --seq 4096 --world 8 --micro-batch 8 --hardware h200 "
              "--precision bf16 --recompute full");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tp-sp "));
  EXPECT_THAT(r.out, HasSubstr("dp x tp+sp"));
  EXPECT_THAT(r.out, HasSubstr("dp x tsp"));
  EXPECT_THAT(r.out, HasSubstr("\n* "));  // the recommendation
  EXPECT_THAT(r.out, HasSubstr("longest sequence that fits"));
  EXPECT_THAT(r.out, HasSubstr("times against its dry run's virtual clock; prefill weight bytes "
                               "unchecked"));
  // 16 baseline layouts of 8 devices and 3 TSP ones (tsp 8, dp 2 x tsp 4, dp 4 x tsp 2).
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.size() > 2 && (line[0] == '*' || line[0] == ' ') && line[1] == ' ' &&
        line.find('|') != std::string::npos && line.find("strategy") == std::string::npos)
      ++rows;
  EXPECT_EQ(rows, 19);  // one node: --pp auto searches no pipeline
}

int table_rows(const std::string& out, const std::string& starting = "") {
  std::istringstream lines(out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.size() > 2 && (line[0] == '*' || line[0] == ' ') && line[1] == ' ' &&
        line.find('|') != std::string::npos && line.find("strategy") == std::string::npos &&
        line.compare(2, starting.size(), starting) == 0)
      ++rows;
  return rows;
}

// --pp all searches every pipeline degree within a node too; a list searches those; a degree
// that does not divide the world (or exceeds the layers) is refused.
TEST(PlanCli, PipelineDegreesAreSearchedWhenAskedOrAcrossNodes) {
  const std::string base =
      "plan --model 7b --seq 4096 --world 8 --micro-batch 8 --hardware h200 "
      "--precision bf16 --recompute full --grad-accum 8";
  const CliRun all = origami(base + " --pp all");
  ASSERT_EQ(all.code, 0) << all.err;
  // 19 layouts of 8 devices, then per pp stage group: 4 devices 11 (pp 2), 2 devices 5 (pp 4),
  // 1 device 1 (pp 8) -> 36.
  EXPECT_EQ(table_rows(all.out), 36);
  EXPECT_EQ(table_rows(all.out, "pp"), 17);
  EXPECT_THAT(all.out, HasSubstr("bubble"));
  const CliRun two = origami(base + " --pp 1,2");
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(table_rows(two.out), 30);
  const CliRun bad = origami(base + " --pp 3");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--pp"));
  EXPECT_EQ(origami(base + " --pp 0").code, 2);
  EXPECT_EQ(origami(base + " --pp x").code, 2);
}

// The command: 70B at 128K tokens on 8 nodes of 8. Across nodes --pp auto searches the
// pipelines: pp rows are predicted, ranked with the others, and one is the recommendation
// (they alone fit, with the worst stage's memory; docs/planner.md has the table).
TEST(PlanCli, SeventyBillionAtOneTwentyEightKOnEightNodesRanksPipelines) {
  const std::string json = ::testing::TempDir() + "origami_plan_70b.json";
  const CliRun r =
      origami("plan --model 70b --seq 131072 --world 64 --devices-per-node 8 --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(table_rows(r.out, "pp"), 0);
  const nlohmann::json rows = nlohmann::json::parse(slurp(json))["rows"];
  int staged = 0, recommended_pp = 0;
  double last_rate = 1e300;
  for (const auto& row : rows) {
    if (row["mesh"]["pp"].get<int>() == 1 || !row["feasible"]) continue;
    ++staged;
    if (row["recommended"]) ++recommended_pp;
    if (row["fits"]) {
      EXPECT_LE(row["tokens_per_s"].get<double>(), last_rate);
      last_rate = row["tokens_per_s"].get<double>();
    }
  }
  EXPECT_GT(staged, 0);
  EXPECT_EQ(recommended_pp, 1);
  std::remove(json.c_str());
}

// --tsp-schedules broadcast-ring,allgather: each TSP layout once per schedule, the allgather
// rows named tsp-allgather beside tsp's, in the table and the JSON (2 ranks: tsp 2 twice).
TEST(PlanCli, AllgatherRowsBesideBroadcastRing) {
  const std::string json = ::testing::TempDir() + "origami_plan_allgather.json";
  const CliRun r = origami("plan --model tiny --seq 64 --world 2 --hardware cpu "
                           "--tsp-schedules broadcast-ring,allgather --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tsp-allgather"));
  const nlohmann::json rows = nlohmann::json::parse(slurp(json))["rows"];
  EXPECT_EQ(rows.size(), 6u);  // dp, sp, tp, tp-sp, tsp, tsp-allgather
  int allgather = 0;
  for (const auto& row : rows) allgather += row["strategy"] == "tsp-allgather" ? 1 : 0;
  EXPECT_EQ(allgather, 1);
  std::remove(json.c_str());
}

TEST(PlanCli, JsonToAFileAndPlot) {
  const std::string json = ::testing::TempDir() + "origami_plan_rows.json";
  CliRun r = origami("plan --model tiny --seq 64 --world 2 --hardware cpu --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("strategy"));  // the table still goes to standard output
  EXPECT_EQ(nlohmann::json::parse(slurp(json))["rows"].size(), 5u);  // dp, sp, tp, tp-sp, tsp
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  const std::string png = ::testing::TempDir() + "origami_plan_memory.png";
  r = origami("plan --model tiny --seq 64 --world 2 --hardware cpu --plot " + png);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(png, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  for (const std::string& f : {png, png + ".dat", png + ".gp"}) std::remove(f.c_str());
}

TEST(PlanCli, BadInputExitsTwoWithAMessage) {
  CliRun r = origami("plan --model nope --seq 8 --devices 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("tiny, tiny-moe, small, 1b, 7b, 13b, 70b"));
  r = origami("plan --model small --seq 8 --devices 2 --recompute some");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("none, mlp or full"));
  r = origami("plan --model small --seq 8 --devices 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--world"));
  r = origami("plan --model small --seq 8 --devices 2 --hardware tpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("mi300x, h100, h200, cpu"));
  r = origami("plan --model small --seq 8 --devices 2 --grad-accum 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--grad-accum must be >= 1"));
  r = origami("plan --model small --seq 8 --devices 2 --precision fp8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("fp32, bf16"));
  r = origami("plan --model 7b --seq 4096 --world 12 --hardware h100");  // 1.5 nodes
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("whole number of nodes"));
  // 70B on 3 devices: 3 divides no head count and 4096 is not a multiple of 6: every layout
  // is refused, each row says why, and the command explains.
  r = origami("plan --model 70b --seq 4096 --world 3 --devices-per-node 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("infeasible: tensor-parallel (tp) degree 3 must divide the number of attention heads"));
  EXPECT_THAT(r.err, HasSubstr("no layout of 3 devices"));
  // A sequence that fits nowhere: the longest that does is named.
  r = origami("plan --model 7b --seq 4000000 --world 8 --hardware h200");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("fits no layout"));
  EXPECT_THAT(r.err, HasSubstr("the longest that fits is"));
}

// Nothing fits: the sentence names the closest layout and a computed remedy, and the remedy
// applied fits (exit 0).
TEST(PlanCli, WhenNothingFitsTheRemedyNamedFits) {
  const std::string job = "plan --model 7b --seq 131072 --world 8 --hardware h100 --precision fp32";
  CliRun r = origami(job);
  ASSERT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the closest, "));
  EXPECT_THAT(r.err, HasSubstr("(largest: "));
  ASSERT_THAT(r.err, HasSubstr("with --recompute full, "));
  r = origami(job + " --recompute full");
  EXPECT_EQ(r.code, 0) << r.err;
  // The same sentence in the JSON document, for tools; null when a layout fits.
  r = origami(job + " --json");
  ASSERT_EQ(r.code, 2) << r.err;
  const auto advice = nlohmann::json::parse(r.out)["advice"];
  ASSERT_TRUE(advice.is_string()) << r.out.substr(0, 400);
  EXPECT_THAT(advice.get<std::string>(), HasSubstr("with --recompute full, "));
  EXPECT_THAT(r.err, HasSubstr(advice.get<std::string>()));
  r = origami(job + " --recompute full --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["advice"].is_null());
}

// --global-batch fixes the step's sequences instead of the micro-batch: each row's replicas
// run global / (dp x grad-accum) each, predicted as if that micro-batch had been given, and a
// dp that does not divide it is refused on its row.
TEST(PlanCli, AGlobalBatchGivesEachLayoutItsOwnMicroBatch) {
  const CliRun r = origami(
      "plan --model small --seq 256 --global-batch 8 --grad-accum 2 --devices 4 --hardware cpu "
      "--json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["global_batch"], 8);
  const origami::ModelConfig m = origami::model_preset("small");
  const origami::plan::Hardware hw = origami::plan::hardware_preset("cpu");
  int seen_dp4 = 0;
  for (const auto& row : out["rows"]) {
    const origami::plan::Mesh mesh{.pp = row["mesh"]["pp"],
                                   .dp = row["mesh"]["dp"],
                                   .tp = row["mesh"]["tp"],
                                   .sp = row["mesh"]["sp"],
                                   .tsp = row["mesh"]["tsp"],
                                   .sequence_parallel = row["sequence_parallel"]};
    ASSERT_TRUE(row["feasible"]) << row["error"];  // 8 / (dp x 2) is whole for dp 1, 2, 4
    const std::int64_t micro = 8 / (mesh.dp * 2);
    EXPECT_EQ(row["micro_batch"], micro) << row["mesh"];
    origami::plan::Workload w;
    w.batch = micro;
    w.grad_accum = 2;
    w.seq = 256;
    EXPECT_EQ(row["bytes"]["total"], origami::plan::predict(m, mesh, w, hw).memory.total());
    if (mesh.dp == 4) ++seen_dp4;
  }
  EXPECT_EQ(seen_dp4, 1);
  // 6 sequences over dp 4 x 1 micro-batch: that row refused, naming a global batch that works.
  const CliRun odd = origami(
      "plan --model small --seq 256 --global-batch 6 --devices 4 --hardware cpu --json");
  ASSERT_EQ(odd.code, 0) << odd.err;
  int refused = 0;
  const auto odd_rows = nlohmann::json::parse(odd.out)["rows"];
  for (const auto& row : odd_rows)
    if (row["mesh"]["dp"] == 4) {
      ASSERT_FALSE(row["feasible"]);
      EXPECT_THAT(row["error"].get<std::string>(), HasSubstr("multiple of 4"));
      ++refused;
    }
  EXPECT_EQ(refused, 1);
  // The table says it per row; the two ways of giving the batch exclude each other.
  const CliRun table =
      origami("plan --model small --seq 256 --global-batch 8 --devices 4 --hardware cpu");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("x micro-batch 8 / (dp x 1) per replica"));
  EXPECT_THAT(table.out, HasSubstr("| micro-batch 2"));
  EXPECT_EQ(origami("plan --model small --seq 256 --global-batch 8 --micro-batch 2 --devices 4")
                .code,
            2);
  EXPECT_EQ(origami("plan --model small --seq 256 --global-batch 0 --devices 4").code, 2);
}

// --documents: every row states the masked attention FLOPs and, where it splits the sequence,
// the ranks' attention imbalance (JSON and table), the planner's prediction for the same
// sample; rows that split no sequence say 0.
TEST(PlanCli, DocumentsGiveEveryRowItsMaskedFlopsAndImbalance) {
  const std::string job = "plan --model small --seq 256 --batch 2 --devices 4 --hardware cpu "
                          "--documents lognormal:48,1 --layout balanced";
  const CliRun r = origami(job + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["documents"]["source"], "lognormal:48,1");
  EXPECT_EQ(out["documents"]["layout"], "balanced");
  EXPECT_EQ(out["documents"]["sample_rows"], 64);
  EXPECT_GT(out["documents"]["documents_per_row"].get<double>(), 2.0);
  const origami::ModelConfig m = origami::model_preset("small");
  origami::plan::Workload w;
  w.batch = 2;
  w.seq = 256;
  w.documents = std::make_shared<const origami::plan::DocumentSample>(
      origami::cli::document_sample("lognormal:48,1", 256,
                                    origami::parallel::TokenLayoutKind::Balanced));
  const origami::plan::Hardware hw = origami::plan::hardware_preset("cpu");
  int split = 0;
  for (const auto& row : out["rows"]) {
    ASSERT_TRUE(row["feasible"]) << row;
    const origami::plan::Mesh mesh{.pp = row["mesh"]["pp"],
                                   .dp = row["mesh"]["dp"],
                                   .tp = row["mesh"]["tp"],
                                   .sp = row["mesh"]["sp"],
                                   .tsp = row["mesh"]["tsp"],
                                   .sequence_parallel = row["sequence_parallel"]};
    const origami::plan::Prediction want = origami::plan::predict(m, mesh, w, hw);
    EXPECT_DOUBLE_EQ(row["attention_flops_per_device_per_step"].get<double>(),
                     want.attention_flops_per_device);
    EXPECT_LT(row["attention_flops_per_device_per_step"].get<double>(),
              0.5 * row["causal_attention_flops_per_device_per_step"].get<double>());
    EXPECT_DOUBLE_EQ(row["attention_imbalance"].get<double>(), want.attention_imbalance);
    EXPECT_DOUBLE_EQ(row["step_s"].get<double>(), want.step_s);
    EXPECT_DOUBLE_EQ(row["bubble"].get<double>(), want.bubble);
    if (mesh.token_degree() > 1) {
      ++split;
      EXPECT_GT(row["attention_imbalance_worst"].get<double>(), 0.0) << row["mesh"];
    } else {
      EXPECT_EQ(row["attention_imbalance"].get<double>(), 0.0) << row["mesh"];
    }
  }
  EXPECT_GE(split, 4);  // sp 4, tp 2 x sp 2 (twice), dp 2 x sp 2, tsp 4, dp 2 x tsp 2
  const CliRun table = origami(job);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("packed documents (lognormal:48,1, implies --document-masking)"));
  EXPECT_THAT(table.out, HasSubstr("attn imb"));
  // Without --documents: no columns, the causal FLOPs, imbalance 0.
  const CliRun plain = origami("plan --model small --seq 256 --devices 4 --hardware cpu --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  const auto p = nlohmann::json::parse(plain.out);
  EXPECT_TRUE(p["documents"].is_null());
  EXPECT_EQ(p["rows"][0]["attention_imbalance"], 0.0);
}

TEST(PlanCli, BadDocumentsExitTwoNamingTheFlag) {
  const std::string job = "plan --model small --seq 256 --devices 4 --hardware cpu ";
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--documents lognormal:1024", "write lognormal:MEDIAN,SIGMA"},
           {"--documents lognormal:abc,1", "write lognormal:MEDIAN,SIGMA"},
           {"--documents lognormal:0,1", "the median document length must be > 0"},
           {"--documents lognormal:-5,1", "the median document length must be > 0"},
           {"--documents lognormal:100,-1", "sigma, the log standard deviation, must be >= 0"},
           {"--documents /nonexistent/prefix", "--documents '/nonexistent/prefix'"},
           {"--layout balanced", "needs --documents"},
           {"--layout full", "--layout full"},
           {"--layout diagonal", "unknown token layout 'diagonal'"}}) {
    const CliRun r = origami(job + flags);
    EXPECT_EQ(r.code, 2) << flags << ": " << r.all();
    EXPECT_THAT(r.err, HasSubstr(says)) << flags;
  }
  // A huge median is fine (each length is clamped to S before rounding); a row longer than the
  // sample's 2^24 tokens is refused before it is allocated.
  EXPECT_EQ(origami(job + "--documents lognormal:1e300,1").code, 0);
  const CliRun longest = origami("plan --model small --seq 33554432 --devices 4 --hardware cpu "
                                 "--documents lognormal:1024,1");
  EXPECT_EQ(longest.code, 2) << longest.all();
  EXPECT_THAT(longest.err, HasSubstr("--documents samples whole rows of --seq tokens, at most"));
  // A flat .bin has no document index.
  const std::string flat = ::testing::TempDir() + "origami_plan_flat.bin";
  {
    std::ofstream out(flat, std::ios::binary);
    for (std::uint16_t i = 0; i < 600; ++i) out.write(reinterpret_cast<const char*>(&i), 2);
  }
  const CliRun r = origami(job + "--documents " + flat);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("--documents '" + flat + "'"));
  EXPECT_THAT(r.err, HasSubstr("has no document index"));
  // With --eos-id its documents end after each token 99 (ids 0..599: 100 + 500 tokens), as
  // `train --eos-id` reads it; --eos-id without a file to cut is refused.
  const CliRun cut = origami(job + "--json --documents " + flat + " --eos-id 99");
  ASSERT_EQ(cut.code, 0) << cut.all();
  const auto doc = nlohmann::json::parse(cut.out)["documents"];
  EXPECT_EQ(doc["source"], flat);
  EXPECT_GT(doc["documents_per_row"].get<double>(), 1.0);
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--eos-id 99", "add --documents FILE.bin or drop --eos-id"},
           {"--documents lognormal:1024,1 --eos-id 99", "is a length distribution"},
           {"--documents " + flat + " --eos-id 7777", "--documents '" + flat + "'"}}) {
    const CliRun bad = origami(job + flags);
    EXPECT_EQ(bad.code, 2) << flags << ": " << bad.all();
    EXPECT_THAT(bad.err, HasSubstr(says)) << flags;
  }
  std::remove(flat.c_str());
}

}  // namespace
