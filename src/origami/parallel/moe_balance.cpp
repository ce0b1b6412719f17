#include "origami/parallel/moe_balance.h"

#include <cmath>

#include "origami/core/error.h"

namespace origami::parallel {

MoeJobBalance::MoeJobBalance(const ModelConfig& config) : config_(config) { set_pass(0); }

void MoeJobBalance::set_pass(int id) {
  pass_ = &passes_.try_emplace(id, static_cast<std::size_t>(config_.num_hidden_layers))
               .first->second;
}

void MoeJobBalance::record(std::int64_t l, ParallelGroups& groups, const MoeDims& d,
                           const MoeRouting& r, const float* logits) {
  const std::vector<double> sums = moe_probability_sums(d, logits);
  std::vector<double> counts(r.chosen.begin(), r.chosen.end());  // exact below 2^53
  counts.insert(counts.end(), sums.begin(), sums.end());
  groups.tokens().all_reduce(counts, counts);
  groups.dp().all_reduce(counts, counts);
  const auto E = static_cast<std::size_t>(d.experts);
  const auto layer = static_cast<std::size_t>(l);
  Pass& p = *pass_;
  std::vector<std::int64_t>& chosen = p.chosen[layer];
  chosen.resize(E);
  for (std::size_t e = 0; e < E; ++e) chosen[e] = std::llround(counts[e]);
  // Kept: dropless, every chosen assignment. A capacity's priority order spans the job's
  // micro-batch, so validate_plan allows one only where a rank routes all of it (no token axis,
  // no dp): the rank's own routing is then the job's, its drops included.
  if (r.capacity > 0) {
    ORIGAMI_CHECK(groups.tokens().size() == 1 && groups.dp().size() == 1,
                  "a capacity with the tokens split over {} x {} ranks", groups.tokens().size(),
                  groups.dp().size());
    std::vector<std::int64_t> kept(E);
    for (std::size_t e = 0; e < E; ++e) kept[e] = r.offset[e + 1] - r.offset[e];
    p.load[layer] = MoeLoad{kept, r.dropped};
  } else {
    p.load[layer] = MoeLoad{chosen, 0};
  }
  p.rows[layer] = d.rows * groups.tokens().size() * groups.dp().size();
  p.balance[layer] = moe_balance(
      chosen, std::vector<double>(counts.begin() + static_cast<std::ptrdiff_t>(E), counts.end()),
      p.rows[layer]);
}

std::vector<double> MoeJobBalance::probability_grad(std::int64_t l) const {
  // The loss holds coef x aux_weight x (mean over the layers of each layer's balance).
  const double balance_grad =
      config_.router_aux_loss_coef * aux_weight_ / static_cast<double>(config_.num_hidden_layers);
  const auto layer = static_cast<std::size_t>(l);
  return moe_balance_probability_grad(pass_->chosen[layer], pass_->rows[layer], balance_grad);
}

double MoeJobBalance::router_aux_loss() const {
  if (!config_.is_moe()) return 0.0;
  double sum = 0;
  for (const double b : pass_->balance) sum += b;  // 0 where the pass ran no such layer
  return config_.router_aux_loss_coef * sum / static_cast<double>(config_.num_hidden_layers);
}

MoeLoad MoeJobBalance::load() const {
  MoeLoad load;
  if (config_.is_moe())
    for (const MoeLoad& layer : pass_->load)
      if (!layer.tokens_per_expert.empty()) load.add(layer);
  return load;
}

}  // namespace origami::parallel
