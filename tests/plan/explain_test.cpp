// The planner's sentence when nothing fits (plan/explain.h): it names the closest layout and
// its largest category, and every remedy it offers, applied alone, fits -- checked here by
// predicting again with the remedy applied, not by reading the sentence back.
#include <gtest/gtest.h>

#include <string>

#include "origami/model/config.h"
#include "origami/plan/explain.h"

namespace origami::plan {
namespace {

Workload fp32_workload(std::int64_t seq, Recompute r) {
  Workload w;
  w.seq = seq;
  w.recompute = r;
  w.set_precision(Precision::parse("fp32"));
  return w;
}

TEST(Explain, NamesTheClosestLayoutAndRemediesThatFit) {
  const ModelConfig m = model_preset("7b");
  const Hardware hw = hardware_preset("h100");
  const Workload w = fp32_workload(131072, Recompute::None);
  const std::vector<PlanRow> rows = plan_rows(m, 8, w, hw);
  ASSERT_FALSE(rows.front().recommended) << "the case must not fit for the test to mean anything";
  const std::optional<NoFitAdvice> a = explain_no_fit(m, 8, w, hw, rows);
  ASSERT_TRUE(a.has_value());
  EXPECT_GT(a->closest_bytes, hw.memory_bytes);
  // The closest is the feasible row of the smallest total.
  for (const PlanRow& r : rows)
    if (r.error.empty()) {
      EXPECT_GE(r.prediction.memory.total(), a->closest_bytes);
    }
  EXPECT_FALSE(a->largest_category.empty());
  ASSERT_FALSE(a->remedies.empty());
  for (const Remedy& r : a->remedies) {
    Workload x = w;
    int world = 8;
    if (r.change == "--recompute full") {
      x.recompute = Recompute::Full;
    } else if (r.change == "--precision bf16") {
      x.set_precision(Precision::parse("bf16"));
    } else if (r.change.rfind("--world ", 0) == 0) {
      world = std::stoi(r.change.substr(8));
    } else if (r.change == "--pp all") {
      EXPECT_GT(r.layout.pp, 1);  // the workload as it was, a pipeline layout
    } else if (r.change.rfind("--seq ", 0) == 0) {
      x.seq = std::stoll(r.change.substr(6));
    } else {
      FAIL() << "unknown remedy " << r.change;
    }
    EXPECT_EQ(r.layout.world(), world) << r.change;
    const Prediction p = predict(m, r.layout, x, hw);
    EXPECT_TRUE(p.fits) << r.change;
    EXPECT_EQ(p.memory.total(), r.total_bytes) << r.change;
  }
  const std::string s = a->sentence(8, w.seq, hw);
  EXPECT_NE(s.find(layout_words(a->closest)), std::string::npos) << s;
  EXPECT_NE(s.find(a->remedies.front().change), std::string::npos) << s;
}

// 70B at 128K on 2 devices: the weights' states alone exceed a device at the widest sharding
// (2), and even 8x the devices (tsp 16) does not fit; the sentence says only further sharding
// fits, and offers no remedy that does not fit. (On 64 devices, with the kv heads replicated
// above their 8, tsp 64 and tp 64 fit: Origami's answer to the 70B question.)
TEST(Explain, SaysWhenOnlyFurtherShardingCanFit) {
  const ModelConfig m = model_preset("70b");
  Hardware hw = hardware_preset("h100");
  hw.devices_per_node = 8;
  Workload w = fp32_workload(131072, Recompute::Full);
  w.set_precision(Precision::parse("bf16"));
  const std::vector<PlanRow> rows = plan_rows(m, 2, w, hw);
  const std::optional<NoFitAdvice> a = explain_no_fit(m, 2, w, hw, rows);
  ASSERT_TRUE(a.has_value());
  EXPECT_GT(a->states_bytes, hw.memory_bytes);
  EXPECT_EQ(a->widest_weight_sharding, 2);
  EXPECT_TRUE(a->remedies.empty());
  const std::string s = a->sentence(2, w.seq, hw);
  EXPECT_NE(s.find("pipeline stages"), std::string::npos) << s;
  EXPECT_NE(s.find("more than 2 ways"), std::string::npos) << s;
  // The 64 devices of 8 per node: layouts above the kv-head count fit.
  bool fits = false;
  for (const PlanRow& r : plan_rows(m, 64, w, hw))
    fits = fits || (r.error.empty() && r.prediction.fits && r.layout.weight_degree() > 8);
  EXPECT_TRUE(fits);
}

TEST(Explain, NothingToExplainWhenARowFits) {
  const ModelConfig m = model_preset("tiny");
  const Hardware hw = hardware_preset("h100");
  const Workload w = fp32_workload(64, Recompute::None);
  EXPECT_FALSE(explain_no_fit(m, 2, w, hw, plan_rows(m, 2, w, hw)).has_value());
}

}  // namespace
}  // namespace origami::plan
