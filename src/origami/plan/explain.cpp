#include "origami/plan/explain.h"

#include <fmt/format.h>

#include <algorithm>

#include "origami/core/precision.h"

namespace origami::plan {

namespace {

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

// The recommended (fastest fitting) row of a plan, if any.
std::optional<PlanRow> fitting(const ModelConfig& m, int world, const Workload& w,
                               const Hardware& hw) {
  const std::vector<PlanRow> rows = plan_rows(m, world, w, hw);
  if (rows.empty() || !rows.front().recommended) return std::nullopt;
  return rows.front();
}

}  // namespace

std::string layout_words(const Layout& l) {
  return fmt::format("{} ({})", parallel::family_name(l), l.describe());
}

std::optional<NoFitAdvice> explain_no_fit(const ModelConfig& m, int world, const Workload& w,
                                          const Hardware& hw, const std::vector<PlanRow>& rows) {
  const PlanRow* closest = nullptr;
  for (const PlanRow& r : rows) {
    if (!r.error.empty()) continue;
    if (r.prediction.fits) return std::nullopt;
    if (closest == nullptr || r.prediction.memory.total() < closest->prediction.memory.total())
      closest = &r;
  }
  if (closest == nullptr) return std::nullopt;
  NoFitAdvice a;
  a.closest = closest->layout;
  a.closest_bytes = closest->prediction.memory.total();
  const Memory& cm = closest->prediction.memory;
  a.states_bytes = cm.parameters + cm.gradients + cm.optimizer;
  for (const PlanRow& r : rows)
    if (r.error.empty())
      a.widest_weight_sharding = std::max(a.widest_weight_sharding, r.layout.weight_degree());
  for (const auto& [name, bytes] : closest->prediction.categories())
    if (bytes > a.largest_bytes) {
      a.largest_category = name;
      a.largest_bytes = bytes;
    }
  const auto add = [&](std::string change, const std::optional<PlanRow>& r) {
    if (r) a.remedies.push_back({std::move(change), r->layout, r->prediction.memory.total()});
  };
  if (w.recompute != Recompute::Full) {
    Workload x = w;
    x.recompute = Recompute::Full;
    add("--recompute full", fitting(m, world, x, hw));
  }
  if (!w.bf16()) {
    Workload x = w;
    x.set_precision(Precision::parse("bf16"));
    add("--precision bf16", fitting(m, world, x, hw));
  }
  // Pipeline stages, when the rows did not search them (--pp auto within a node): each stage
  // holds only its layers' states and activations.
  if (std::none_of(rows.begin(), rows.end(), [](const PlanRow& r) { return r.layout.pp > 1; })) {
    const std::vector<PlanRow> staged =
        plan_rows(m, world, w, hw, {parallel::TspSchedule::BroadcastRing},
                  pipeline_degrees(world, m.num_hidden_layers));
    if (!staged.empty() && staged.front().recommended) add("--pp all", staged.front());
  }
  for (int more = 2; more <= 8; more *= 2) {
    const std::optional<PlanRow> r = fitting(m, world * more, w, hw);
    if (r) {
      add(fmt::format("--world {}", world * more), r);
      break;
    }
  }
  // The longest sequence any feasible layout fits, below the one asked for.
  std::int64_t best_seq = 0;
  for (const PlanRow& r : rows)
    if (r.error.empty())
      best_seq = std::max(best_seq, longest_sequence(m, r.layout, w, hw, w.seq).value_or(0));
  if (best_seq > 0) {
    Workload x = w;
    x.seq = best_seq;
    x.documents = nullptr;  // the sample's rows are of w.seq; the advice is about memory
    add(fmt::format("--seq {}", best_seq), fitting(m, world, x, hw));
  }
  return a;
}

std::string NoFitAdvice::sentence(int world, std::int64_t seq, const Hardware& hw) const {
  std::string s = fmt::format(
      "sequence {} fits no layout of {} devices of {}: the closest, {}, needs {} (largest: {} "
      "{})",
      seq, world, gib(hw.memory_bytes), layout_words(closest), gib(closest_bytes),
      largest_category, gib(largest_bytes));
  if (states_bytes > hw.memory_bytes)
    s += fmt::format(
        "; its parameters, gradients and optimizer state alone need {}, and no layout shards "
        "the weights more than {} ways (the largest degree the heads, kv heads and MLP width "
        "allow among these devices): they fit only sharded further, by pipeline stages (each "
        "holds its layers' states; --pp all searches them) or by optimizer sharding over dp "
        "(--shard-optimizer, on a layout with dp > 1)",
        gib(states_bytes), widest_weight_sharding);
  if (remedies.empty())
    return s +
           "; none of --recompute full, --precision bf16, pipeline "
           "stages, up to 8x the devices or a shorter --seq makes one fit";
  for (std::size_t i = 0; i < remedies.size(); ++i)
    s += fmt::format("{} with {}{}, {} fits in {}", i == 0 ? ";" : ", or", remedies[i].change,
                     remedies[i].change.rfind("--seq ", 0) == 0 ? " (the longest that fits is "
                                                                  "that many tokens)"
                                                                : "",
                     layout_words(remedies[i].layout), gib(remedies[i].total_bytes));
  return s;
}

}  // namespace origami::plan
