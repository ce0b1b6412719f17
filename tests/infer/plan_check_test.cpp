// The planner's inference rows (plan/inference.h) against the engine they describe: for
// D = 1, 2, 4, several prompt lengths, batch sizes and cache capacities, each rank's peak of
// every tracker category during prefill and during one decode step (the tracker's peaks reset
// between the phases) is within 5% of the prediction, and the bytes each operation sends are
// exactly the predicted ones (prefill: the axis' K/V all-gathers per rank and the last rows'
// broadcasts over all ranks; the embedding's all-to-alls are data dependent: calls only;
// decode: the all-reduces of [B, h] and the sampling's argmax per rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "infer_harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/plan/inference.h"

namespace origami::infer_test {
namespace {

constexpr double kMemoryTolerance = 0.05;

struct Case {
  int D;
  std::int64_t batch, seq, new_tokens;
  bool contiguous = false;  // token layout: contiguous chunks (S % D) instead of zigzag
  std::int64_t kv_heads = 4;  // gqa_model's; 2 below D: each kv head (and its cache) replicated
};

std::array<std::int64_t, 6> categories(const plan::InferenceMemory& m) {
  return {m.parameters, m.kv_cache, m.comm_buffers, m.workspace, m.activations, m.logits};
}
std::array<std::int64_t, 6> peaks(const MemoryTracker& t) {
  return {t.peak(MemCategory::Parameters),  t.peak(MemCategory::KvCache),
          t.peak(MemCategory::CommBuffers), t.peak(MemCategory::Workspace),
          t.peak(MemCategory::Activations), t.peak(MemCategory::Logits)};
}
constexpr std::array<const char*, 6> kNames{"parameters", "kv_cache",    "comm_buffers",
                                            "workspace",  "activations", "logits"};

// Worst |predicted / measured - 1| over the categories; fails on any above the tolerance.
double compare(const std::array<std::int64_t, 6>& want, const std::array<std::int64_t, 6>& got,
               const std::string& what) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] == 0) {
      EXPECT_EQ(want[i], 0) << what << " " << kNames[i];
      continue;
    }
    const double r = std::abs(double(want[i]) / double(got[i]) - 1);
    worst = std::max(worst, r);
    EXPECT_LE(r, kMemoryTolerance)
        << what << " " << kNames[i] << ": predicted " << want[i] << ", measured " << got[i];
  }
  return worst;
}

class PlanCheck : public ::testing::TestWithParam<Case> {};

TEST_P(PlanCheck, MemoryWithinFivePercentAndBytesExact) {
  const auto [D, B, S, T, contiguous, kv_heads] = GetParam();
  const ModelConfig c = gqa_model(kv_heads);
  plan::Workload w;
  w.batch = B;
  w.seq = S;
  w.contiguous = contiguous;
  const plan::InferenceRow row = plan::predict_inference(c, D, w, plan::hardware_preset("h100"), T);
  const auto prompts = random_prompts(c, std::vector<int>(static_cast<std::size_t>(B), int(S)));
  std::mutex m;
  std::int64_t last_rows = 0;
  double worst = 0;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    MemoryTracker& tracker = world.tracker();
    infer::InferenceEngine e(
        c, world, tracker,
        contiguous ? parallel::TokenLayoutKind::Contiguous : parallel::TokenLayoutKind::Zigzag);
    e.initialize(kSeed);
    const std::string where = fmt::format("D {} B {} S {} T {}{} kv {} rank {}", D, B, S, T,
                                          contiguous ? " contiguous" : "", kv_heads, world.rank());
    tracker.reset_peaks();
    e.axis().reset_stats();
    const Tensor* logits = &e.prefill(prompts, T);
    ASSERT_EQ(e.prefill_length(), S) << where;
    const auto prefill_peaks = peaks(tracker);
    const comm::CommStats p = e.axis().stats();
    const infer::SamplingOptions greedy;
    auto tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 0);
    tracker.reset_peaks();
    e.axis().reset_stats();
    logits = &e.decode(tok);
    tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 1);
    const auto decode_peaks = peaks(tracker);
    const comm::CommStats d = e.axis().stats();

    const double w1 = compare(categories(row.prefill), prefill_peaks, where + " prefill");
    const double w2 = compare(categories(row.decode), decode_peaks, where + " decode");
    if (std::getenv("ORIGAMI_PLAN_CHECK_VERBOSE"))
      for (std::size_t i = 0; i < kNames.size(); ++i)
        fmt::print("{} {:>12}: prefill {:>8} / {:>8}   decode {:>8} / {:>8}\n", where, kNames[i],
                   categories(row.prefill)[i], prefill_peaks[i], categories(row.decode)[i],
                   decode_peaks[i]);
    EXPECT_EQ(p.op("all_gather").bytes_sent, row.traffic.prefill_kv_gathers) << where;
    if (D > 1) {
      EXPECT_EQ(p.op("all_to_all").calls, 3) << where;
      EXPECT_EQ(p.op("broadcast").calls, B) << where;
    }
    EXPECT_EQ(d.op("all_reduce").bytes_sent, row.traffic.decode_all_reduce) << where;
    EXPECT_EQ(d.op("all_reduce_maxloc").bytes_sent, row.traffic.decode_argmax) << where;
    EXPECT_EQ(d.total().bytes_sent, row.decode_bytes) << where;
    std::lock_guard lock(m);
    last_rows += p.op("broadcast").bytes_sent;
    worst = std::max({worst, w1, w2});
  });
  EXPECT_EQ(last_rows, row.traffic.prefill_last_rows_all_ranks);
  RecordProperty("worst_memory_ratio", fmt::format("{:.4f}", worst));
  if (std::getenv("ORIGAMI_PLAN_CHECK_VERBOSE")) fmt::print("worst {:.4f}\n", worst);
}

// gqa_model(): 8 heads, 4 kv heads (2 in the replicated cases, D = 2·Hkv and 4·Hkv), h 64,
// F 96, V 97, 2 layers, 64 positions. S is a multiple of 2D (zigzag) or of D (contiguous); B a
// multiple of D keeps the all-reduces' byte counts exact.
INSTANTIATE_TEST_SUITE_P(
    Cases, PlanCheck,
    ::testing::Values(Case{1, 1, 8, 4}, Case{1, 3, 24, 1}, Case{2, 2, 8, 6}, Case{2, 4, 16, 10},
                      Case{2, 2, 40, 3}, Case{4, 4, 8, 5}, Case{4, 4, 32, 8}, Case{4, 8, 16, 20},
                      Case{2, 2, 6, 2, true}, Case{4, 4, 12, 3, true}, Case{4, 4, 16, 5, false, 2},
                      Case{8, 8, 16, 3, false, 2}, Case{8, 8, 8, 2, true, 2}),
    [](const auto& info) {
      const Case& k = info.param;
      return fmt::format("D{}_B{}_S{}_T{}{}{}", k.D, k.batch, k.seq, k.new_tokens,
                         k.contiguous ? "_contiguous" : "",
                         k.kv_heads == 4 ? "" : fmt::format("_kv{}", k.kv_heads));
    });

}  // namespace
}  // namespace origami::infer_test
