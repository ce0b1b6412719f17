// A checkpoint resumed under the other --precision (core/precision.h): it holds the fp32
// master weights and AdamW moments under either, so they load as they are, with a note naming
// both precisions, never silently. (A bf16 run resumed as bf16, bit for bit: ExactResume.)
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "ckpt_util.h"

namespace origami::ckpt_test {
namespace {

// bf16 -> fp32 and fp32 -> bf16; the resumed step, computed in the other precision from the
// same weights, is close to the saved run's and not equal to it (what the note says).
TEST(PrecisionResume, AnotherPrecisionLoadsTheMasterWeightsAndSaysSo) {
  for (const auto& [saved, resumed] : {std::pair<std::string, std::string>{"bf16", "fp32"},
                                       std::pair<std::string, std::string>{"fp32", "bf16"}}) {
    const std::string a = fresh_dir("precision_" + saved);
    const TrainResult ra = [&] {
      TrainOptions o = tiny_options({"single", 1, "", saved}, 4);
      o.checkpoint.save_dir = a;
      o.checkpoint.save_every = 2;
      return quiet_train(o);
    }();
    TrainOptions ob = tiny_options({"single", 1, "", resumed}, 4);
    ob.checkpoint.resume = ckpt::checkpoint_dir(a, 2);
    std::vector<std::string> lines;
    const TrainResult rb = quiet_train(ob, &lines);
    ASSERT_EQ(rb.steps.size(), 2u) << saved << " -> " << resumed;
    EXPECT_TRUE(said(lines, "was trained under --precision " + saved +
                                ", this run has --precision " + resumed))
        << saved << " -> " << resumed;
    EXPECT_TRUE(said(lines, "resumed from"));
    EXPECT_NE(rb.steps[0].loss, ra.steps[2].loss) << saved << " -> " << resumed;
    EXPECT_NEAR(rb.steps[0].loss, ra.steps[2].loss, 2e-2 * std::abs(ra.steps[2].loss));
    std::filesystem::remove_all(a);
  }
}

// An fp32 run resumed as fp32 says nothing of precision.
TEST(PrecisionResume, TheSamePrecisionSaysNothing) {
  const std::string a = fresh_dir("precision_same");
  TrainOptions o = tiny_options({"single", 1, ""}, 2);
  o.checkpoint.save_dir = a;
  o.checkpoint.save_every = 1;
  quiet_train(o);
  TrainOptions ob = tiny_options({"single", 1, ""}, 2);
  ob.checkpoint.resume = ckpt::checkpoint_dir(a, 1);
  std::vector<std::string> lines;
  quiet_train(ob, &lines);
  EXPECT_TRUE(said(lines, "resumed from"));
  EXPECT_FALSE(said(lines, "--precision"));
  std::filesystem::remove_all(a);
}

}  // namespace
}  // namespace origami::ckpt_test
