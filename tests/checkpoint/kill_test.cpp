// A training process killed while writing a checkpoint, at several points of the protocol
// (ORIGAMI_CRASH_AT, a test-only hook that ends the process at once, as SIGKILL would): the
// previous checkpoint still loads and the run resumes from it exactly; the partial one is
// ignored with a message.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt_util.h"

namespace origami::ckpt_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Proc {
  int code;
  std::string output;
};

Proc origami(const std::string& env, const std::string& args, const std::string& dir) {
  const std::string log = dir + "/log.txt";
  const std::string cmd = env + " " + std::string(ORIGAMI_BINARY_DIR) + "/origami " + args +
                          " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).at("loss").get<double>());
  return out;
}

class Kill : public ::testing::TestWithParam<std::string> {};

TEST_P(Kill, PreviousCheckpointResumesExactly) {
  const std::string point = GetParam();
  const std::string dir = fresh_dir("kill_" + point);
  std::ofstream(dir + "/config.json") << model_config_to_json(tiny_model());
  const std::string common = "train --config " + dir + "/config.json --seq 16 --batch 4 " +
                             "--grad-accum 2 --warmup 2 --lr 0.01 --threads 1 " +
                             "--strategy tp --degree 2 --steps 4 ";
  // The reference: 4 steps without stopping.
  Proc ref = origami("", common + "--save-dir " + dir + "/ref --metrics " + dir + "/ref.jsonl", dir);
  ASSERT_EQ(ref.code, 0) << ref.output;
  // Step 2 saved completely, then the process dies while writing step 4.
  Proc crashed = origami("ORIGAMI_CRASH_AT=" + point + "@4",
                        common + "--save-every 2 --save-dir " + dir + "/run", dir);
  ASSERT_EQ(crashed.code, 86) << crashed.output;
  EXPECT_THAT(crashed.output, HasSubstr("ORIGAMI_CRASH_AT=" + point));
  ASSERT_TRUE(ckpt::is_complete(ckpt::checkpoint_dir(dir + "/run", 2)));
  ASSERT_FALSE(ckpt::is_complete(ckpt::checkpoint_dir(dir + "/run", 4)));
  // An explicit --resume of the partial one is refused.
  Proc refused = origami("", common + "--resume " + ckpt::checkpoint_dir(dir + "/run", 4), dir);
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("incomplete"));
  // Restart with the same --save-dir: the partial step 4 is ignored, step 2 resumed.
  Proc resumed = origami("", common + "--save-dir " + dir + "/run --metrics " + dir + "/res.jsonl",
                        dir);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("ignoring incomplete checkpoint " +
                                        ckpt::checkpoint_dir(dir + "/run", 4)));
  EXPECT_THAT(resumed.output, HasSubstr("resumed from " + ckpt::checkpoint_dir(dir + "/run", 2)));
  const std::vector<double> lr = losses(dir + "/ref.jsonl"), lres = losses(dir + "/res.jsonl");
  ASSERT_EQ(lr.size(), 4u);
  ASSERT_EQ(lres.size(), 2u);
  EXPECT_EQ(lres[0], lr[2]);
  EXPECT_EQ(lres[1], lr[3]);
  expect_same_tensors(ckpt::checkpoint_dir(dir + "/ref", 4), ckpt::checkpoint_dir(dir + "/run", 4));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Points, Kill,
                         ::testing::Values("before_shards", "mid_shard", "after_shards",
                                           "after_index"));

}  // namespace
}  // namespace origami::ckpt_test
