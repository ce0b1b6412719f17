// Smoke test of the strategies benchmark (bench/strategies_bench.cpp): its one-step runner on
// a tiny model at two sequence lengths, every strategy at degree 4, and, when the program has
// been built, the program itself end to end (sweep and longest modes, CSV rows). Figures are
// checked for what is deterministic: memory, bytes, which probe fits; never times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../../bench/strategy_step.h"

namespace origami::bench {
namespace {

ModelConfig tiny() {
  ModelConfig m;
  m.vocab_size = 96;
  m.hidden_size = 64;
  m.intermediate_size = 128;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 8;
  m.num_key_value_heads = 4;
  m.max_position_embeddings = 256;
  return m;
}

StepRun step(const std::string& name, std::int64_t seq, Recompute r = Recompute::None) {
  StepOptions o;
  o.seq = seq;
  o.recompute = r;
  o.threads = 1;
  return run_step(tiny(), strategy_case(name, 4), o);
}

TEST(StrategyStep, EveryStrategyRunsAndReportsEveryRank) {
  for (const char* name : {"single", "tp", "tpsp", "sp", "tpxsp", "tsp", "tsp-allgather"})
    for (std::int64_t seq : {64, 128}) {
      const StepRun run = step(name, seq);
      ASSERT_TRUE(run.ok) << name << " " << seq << ": " << run.error;
      EXPECT_EQ(run.ranks.size(), std::string(name) == "single" ? 1u : 4u) << name;
      EXPECT_TRUE(std::isfinite(run.loss)) << name;
      const RankMax mx = rank_max(run);
      EXPECT_GT(mx.peak_total, 0) << name;
      EXPECT_LE(mx.peak_total_min, mx.peak_total) << name;
      // One device moves nothing; every parallel strategy sends on its axes.
      if (std::string(name) == "single")
        EXPECT_EQ(mx.total.bytes_sent, 0);
      else
        EXPECT_GT(mx.total.bytes_sent, 0) << name;
    }
}

TEST(StrategyStep, TspBelowOneDeviceAndWeightTrafficCounted) {
  const RankMax one = rank_max(step("single", 128));
  const RankMax tsp = rank_max(step("tsp", 128));
  EXPECT_LT(tsp.peak_total, one.peak_total);
  // Parameters, gradients and optimizer state: one device's / 4 on every rank (norms aside).
  EXPECT_LT(tsp.peak[static_cast<int>(MemCategory::Parameters)],
            one.peak[static_cast<int>(MemCategory::Parameters)] / 3);
  // The shard broadcasts and ring hops run on TSP's own communicator: they must be counted.
  EXPECT_GT(tsp.ops.at("broadcast").bytes_sent, 0);
  EXPECT_GT(tsp.ops.at("send").bytes_sent, 0);
}

TEST(StrategyStep, MemoryIsDeterministicAndGrowsWithSequence) {
  for (const char* name : {"tp", "tsp"}) {
    const StepRun a = step(name, 128), b = step(name, 128), c = step(name, 256);
    EXPECT_EQ(rank_max(a).peak_total, rank_max(b).peak_total) << name;
    EXPECT_EQ(rank_max(a).total.bytes_sent, rank_max(b).total.bytes_sent) << name;
    EXPECT_GT(rank_max(c).peak_total, rank_max(a).peak_total) << name;
  }
}

// Data parallelism (one sequence per rank) and per-step timing with the link model on, as
// bench/plan_wallclock_bench.cpp uses them: one time per measured step, the same loss
// whether the link model delays the messages or not (it changes when, never what).
TEST(StrategyStep, DataParallelAndPerStepTimesUnderTheLinkModel) {
  EXPECT_EQ(strategy_case("dp", 2).plan.world(), 2);
  StepOptions o;
  o.seq = 64;
  o.batch = 2;
  o.threads = 2;
  o.steps = 3;
  o.time_each = true;
  const StepRun off = run_step(tiny(), strategy_case("dp", 2), o);
  o.link.enabled = true;
  o.link.intra_alpha_s = o.link.inter_alpha_s = 1e-5;
  o.link.intra_beta_Bps = o.link.inter_beta_Bps = 1e9;
  const StepRun on = run_step(tiny(), strategy_case("dp", 2), o);
  for (const StepRun* run : {&off, &on}) {
    ASSERT_TRUE(run->ok) << run->error;
    ASSERT_EQ(run->step_wall_s.size(), 3u);
    for (double t : run->step_wall_s) EXPECT_GT(t, 0);
    EXPECT_GT(rank_max(*run).ops.at("all_reduce").bytes_sent, 0);  // the gradient reduction
  }
  EXPECT_EQ(off.loss, on.loss);
  // Each data-parallel rank runs its own sequence, not the whole global batch: its saved
  // activations are one device's at batch 1.
  StepOptions one_seq;
  one_seq.seq = 64;
  one_seq.threads = 1;
  const auto activations = [](const StepRun& run) {
    return rank_max(run).peak[static_cast<int>(MemCategory::Activations)];
  };
  EXPECT_EQ(activations(off), activations(run_step(tiny(), strategy_case("single", 2), one_seq)));
  // Without time_each the runner records no per-step times (strategies_bench's behaviour).
  o.time_each = false;
  EXPECT_TRUE(run_step(tiny(), strategy_case("dp", 2), o).step_wall_s.empty());
}

TEST(StrategyStep, OverTheCapIsAFailureNamingTheCategory) {
  StepOptions o;
  o.seq = 64;
  o.threads = 1;
  o.cap = 4096;  // below the parameters alone
  const StepRun run = run_step(tiny(), strategy_case("tsp", 4), o);
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("parameters"), std::string::npos) << run.error;
}

TEST(StrategyStep, RefusedPlansNameTheConstraint) {
  EXPECT_THROW(strategy_case("tpxsp", 3), ConfigError);
  EXPECT_THROW(strategy_case("pp", 4), ConfigError);
  StepOptions dp;
  dp.seq = 64;  // dp over 4 ranks needs a global batch divisible by 4
  EXPECT_THROW(run_step(tiny(), strategy_case("dp", 4), dp), ConfigError);
  StepOptions o;
  o.seq = 60;  // zigzag over 4 ranks needs S % 8 == 0
  EXPECT_THROW(run_step(tiny(), strategy_case("tsp", 4), o), ConfigError);
}

// The program (a separate target: the sanitizer build does not build the benchmarks).
std::filesystem::path strategies_bench_program() {
  return std::filesystem::path(ORIGAMI_BINARY_DIR) / "bench" / "strategies_bench";
}

// The program itself, when built: both modes on the tiny model.
TEST(StrategiesBenchProgram, SweepAndLongestWriteTheirCsv) {
  const std::filesystem::path exe = strategies_bench_program();
  if (!std::filesystem::exists(exe)) GTEST_SKIP() << exe << " not built";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "strategies_bench_test";
  std::filesystem::create_directories(dir);
  const std::string model =
      " --hidden 64 --layers 2 --heads 8 --kv-heads 4 --intermediate 128 --vocab 96 --threads 1";
  const std::string sweep = exe.string() + " --mode sweep --seqs 64,128 --recompute none,full" +
                            model + " --csv " + (dir / "sweep.csv").string() + " --comm-csv " +
                            (dir / "comm.csv").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(sweep.c_str()), 0) << sweep;
  std::ifstream f(dir / "sweep.csv");
  std::string line;
  int rows = 0;
  std::getline(f, line);
  EXPECT_EQ(line.rfind("strategy,mesh,seq,", 0), 0u) << line;
  while (std::getline(f, line)) {
    ++rows;
    EXPECT_NE(line.find(",ok,"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 6 * 2 * 2);
  // Longest: a cap that holds the tiny model's weights and some tokens.
  const std::string longest = exe.string() +
                              " --mode longest --strategies tp,tsp --recompute none" +
                              " --cap 1MiB --grid 64 --max-seq 2048" + model + " --csv " +
                              (dir / "longest.csv").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(longest.c_str()), 0) << longest;
  std::ifstream g(dir / "longest.csv");
  std::getline(g, line);
  rows = 0;
  while (std::getline(g, line)) {
    ++rows;
    EXPECT_NE(line.find("memory cap"), std::string::npos) << line;  // the next point failed
  }
  EXPECT_EQ(rows, 2);
  std::filesystem::remove_all(dir);
}

// Splits one CSV line (the benchmark's fields hold no commas but its quoted status texts).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

// --grad-reduce-dtype sweeps the gradients' dtype under the bf16 profile (the fp32 profile's
// rows run once, with fp32 gradients); each row names it, and bf16 gradients take exactly half
// the bytes of fp32 ones on every rank of the same layout.
TEST(StrategiesBenchProgram, SweepsTheGradientDtypeUnderBf16) {
  const std::filesystem::path exe = strategies_bench_program();
  if (!std::filesystem::exists(exe)) GTEST_SKIP() << exe << " not built";
  const std::filesystem::path csv =
      std::filesystem::temp_directory_path() / "strategies_bench_grad_dtype.csv";
  const std::string cmd =
      exe.string() +
      " --mode sweep --strategies single,tsp --seqs 64 --recompute none --precision fp32,bf16"
      " --grad-reduce-dtype fp32,bf16 --degree 2 --hidden 64 --layers 2 --heads 8 --kv-heads 4"
      " --intermediate 128 --vocab 96 --threads 1 --warmup 0 --csv " +
      csv.string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(csv);
  std::string line;
  std::getline(f, line);
  const std::vector<std::string> header = csv_fields(line);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t strategy = column("strategy"), status = column("status"),
                    precision = column("precision"), grads = column("gradients"),
                    dtype = column("grad_reduce_dtype");
  std::map<std::string, std::int64_t> gradient_bytes;  // strategy/precision/dtype -> bytes
  int rows = 0;
  while (std::getline(f, line)) {
    const std::vector<std::string> v = csv_fields(line);
    ASSERT_EQ(v.size(), header.size()) << line;
    EXPECT_EQ(v[status], "ok") << line;
    ++rows;
    gradient_bytes[v[strategy] + "/" + v[precision] + "/" + v[dtype]] = std::stoll(v[grads]);
  }
  EXPECT_EQ(rows, 6);  // 2 layouts x (fp32/fp32, bf16/fp32, bf16/bf16)
  for (const std::string s : {"single", "tsp"}) {
    EXPECT_EQ(gradient_bytes.count(s + "/fp32/bf16"), 0u) << s;
    ASSERT_GT(gradient_bytes[s + "/bf16/fp32"], 0) << s;
    EXPECT_EQ(gradient_bytes[s + "/fp32/fp32"], gradient_bytes[s + "/bf16/fp32"]) << s;
    EXPECT_EQ(2 * gradient_bytes[s + "/bf16/bf16"], gradient_bytes[s + "/bf16/fp32"]) << s;
  }
  std::filesystem::remove(csv);
}

}  // namespace
}  // namespace origami::bench
