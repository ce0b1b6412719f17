#include "origami/plan/layouts.h"

#include <algorithm>

#include "origami/core/error.h"

namespace origami::plan {

std::vector<PlanRow> plan_rows(const ModelConfig& m, int world, const Workload& w,
                               const Hardware& hw,
                               const std::vector<parallel::TspSchedule>& tsp_schedules,
                               const std::vector<int>& pp_degrees) {
  std::vector<Layout> layouts;
  for (const int pp : pp_degrees) {
    ORIGAMI_CHECK(pp >= 1 && world % pp == 0, "pp={} does not divide {} devices", pp, world);
    for (Layout l : parallel::enumerate_meshes(world / pp)) {
      l.pp = pp;
      if (!l.is_tsp()) {
        layouts.push_back(l);
        continue;
      }
      for (parallel::TspSchedule schedule : tsp_schedules) {
        Layout x = l;
        x.tsp_schedule = schedule;
        layouts.push_back(x);
      }
    }
  }
  std::vector<PlanRow> rows;
  for (const Layout& l : layouts) {
    PlanRow r;
    r.layout = l;
    try {
      r.prediction = predict(m, l, w, hw);
    } catch (const ConfigError& e) {
      r.error = e.what();
    }
    rows.push_back(std::move(r));
  }
  const auto rank = [](const PlanRow& r) {
    return !r.error.empty() ? 2 : r.prediction.fits ? 0 : 1;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const PlanRow& a, const PlanRow& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    // Throughput, not step time: a step of dp replicas takes dp micro-batches (the micro-batch
    // is per replica), so layouts with another dp run another global batch per step.
    if (rank(a) == 0) return a.prediction.tokens_per_s > b.prediction.tokens_per_s;
    if (rank(a) == 1) return a.prediction.memory.total() < b.prediction.memory.total();
    return false;
  });
  if (!rows.empty() && rank(rows.front()) == 0) rows.front().recommended = true;
  return rows;
}

std::vector<int> pipeline_degrees(int world, std::int64_t layers) {
  std::vector<int> out;
  for (int pp = 1; pp <= world && pp <= layers; ++pp)
    if (world % pp == 0) out.push_back(pp);
  return out;
}

std::optional<std::int64_t> longest_sequence(const ModelConfig& m, const Layout& l,
                                             const Workload& w, const Hardware& hw,
                                             std::int64_t limit) {
  // Sequences the layout accepts: multiples of 2·sp·tsp (zigzag), and of tp for TP-SP rows.
  const std::int64_t unit = 2 * std::int64_t{l.sp} * l.tsp * l.tp;
  const auto fits = [&](std::int64_t k) {
    Workload x = w;
    x.seq = k * unit;
    x.documents = nullptr;  // memory only: documents change no byte the planner counts
    try {
      return predict(m, l, x, hw).fits;
    } catch (const ConfigError&) {
      return false;
    }
  };
  if (!fits(1)) return std::nullopt;
  std::int64_t lo = 1, hi = 2;  // fits(lo); grow hi until it does not fit (memory grows with S)
  while (hi * unit <= limit && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi * unit > limit) hi = limit / unit + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * unit;
}

}  // namespace origami::plan
