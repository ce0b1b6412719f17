// `origami plan` as a user runs it: --json rows carry the cost model's numbers for every
// factorisation, impossible layouts are rows with the reason, bad input exits 2 with a message.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "origami/model/config.h"
#include "origami/plan/cost_model.h"

namespace {

using ::testing::HasSubstr;

struct CliRun {
  int code;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

CliRun origami(const std::string& args) {
  static int counter = 0;
  const std::string base = ::testing::TempDir() + "origami_plan_" + std::to_string(::getpid()) +
                           "_" + std::to_string(counter++);
  const std::string cmd = std::string(ORIGAMI_BINARY_DIR) + "/origami " + args + " > " + base +
                          ".out 2> " + base + ".err";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base + ".out"), slurp(base + ".err")};
}

TEST(PlanCli, JsonRowsAreTheCostModelsForEveryFactorisation) {
  const CliRun r = origami("plan --model small --seq 256 --batch 2 --devices 4 --recompute mlp --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  // dp x tp x sp = 4: (1,1,4) (1,2,2)x2 (1,4,1)x2 (2,1,2) (2,2,1)x2 (4,1,1) -> 9 rows.
  ASSERT_EQ(rows.size(), 9u);
  const origami::ModelConfig m = origami::model_preset("small");
  origami::plan::Workload w;
  w.batch = 2;
  w.seq = 256;
  w.recompute = origami::plan::Recompute::Mlp;
  int infeasible = 0;
  for (const auto& row : rows) {
    const origami::plan::Mesh mesh{row["mesh"]["dp"], row["mesh"]["tp"], row["mesh"]["sp"],
                                   row["sequence_parallel"]};
    EXPECT_EQ(mesh.world(), 4);
    EXPECT_EQ(row["strategy"], mesh.strategy());
    if (!row["feasible"]) {  // dp=4 cannot split a micro-batch of 2
      EXPECT_EQ(mesh.dp, 4);
      EXPECT_THAT(row["error"].get<std::string>(), HasSubstr("micro-batch"));
      ++infeasible;
      continue;
    }
    const origami::plan::Memory want = origami::plan::memory_per_device(m, mesh, w);
    EXPECT_EQ(row["bytes"]["saved_activations"], want.activations);
    EXPECT_EQ(row["bytes"]["parameters"], want.parameters);
    EXPECT_EQ(row["bytes"]["total"], want.total());
    EXPECT_GT(row["comm_bytes_sent_per_step"].get<std::int64_t>(), 0);
  }
  EXPECT_EQ(infeasible, 1);
}

TEST(PlanCli, TablePrintsOneRowPerLayout) {
  const CliRun r = origami("plan --model 7b --seq 4096 --devices 8 --batch 8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tp(sp regions)"));
  EXPECT_THAT(r.out, HasSubstr("dp x tp+sp"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2 + 16);  // header lines + rows
}

TEST(PlanCli, BadInputExitsTwoWithAMessage) {
  CliRun r = origami("plan --model nope --seq 8 --devices 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("tiny, small, 1b, 7b, 13b, 70b"));
  r = origami("plan --model small --seq 8 --devices 2 --recompute some");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("none, mlp or full"));
  r = origami("plan --model small --seq 8 --devices 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--devices"));
}

}  // namespace
