#include "origami/parallel/moe_balance.h"

#include <cmath>

namespace origami::parallel {

MoeJobBalance::MoeJobBalance(const ModelConfig& config)
    : config_(config),
      balance_(static_cast<std::size_t>(config.num_hidden_layers), 0.0),
      chosen_(static_cast<std::size_t>(config.num_hidden_layers)),
      rows_(static_cast<std::size_t>(config.num_hidden_layers), 0) {}

void MoeJobBalance::record(std::int64_t l, ParallelGroups& groups, const MoeDims& d,
                           const MoeRouting& r, const float* logits) {
  const std::vector<double> sums = moe_probability_sums(d, logits);
  std::vector<double> counts(r.chosen.begin(), r.chosen.end());  // exact below 2^53
  counts.insert(counts.end(), sums.begin(), sums.end());
  groups.tokens().all_reduce(counts, counts);
  groups.dp().all_reduce(counts, counts);
  const auto E = static_cast<std::size_t>(d.experts);
  const auto layer = static_cast<std::size_t>(l);
  std::vector<std::int64_t>& chosen = chosen_[layer];
  chosen.resize(E);
  for (std::size_t e = 0; e < E; ++e) chosen[e] = std::llround(counts[e]);
  rows_[layer] = d.rows * groups.tokens().size() * groups.dp().size();
  balance_[layer] = moe_balance(
      chosen, std::vector<double>(counts.begin() + static_cast<std::ptrdiff_t>(E), counts.end()),
      rows_[layer]);
}

std::vector<double> MoeJobBalance::probability_grad(std::int64_t l) const {
  // The loss holds coef x aux_weight x (mean over the layers of each layer's balance).
  const double balance_grad =
      config_.router_aux_loss_coef * aux_weight_ / static_cast<double>(config_.num_hidden_layers);
  const auto layer = static_cast<std::size_t>(l);
  return moe_balance_probability_grad(chosen_[layer], rows_[layer], balance_grad);
}

double MoeJobBalance::router_aux_loss() const {
  if (!config_.is_moe()) return 0.0;
  double sum = 0;
  for (const double b : balance_) sum += b;
  return config_.router_aux_loss_coef * sum / static_cast<double>(config_.num_hidden_layers);
}

MoeLoad MoeJobBalance::load() const {
  MoeLoad load;
  if (config_.is_moe())
    for (const std::vector<std::int64_t>& chosen : chosen_) load.add(chosen, 0);
  return load;
}

}  // namespace origami::parallel
