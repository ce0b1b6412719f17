// The load-balancing term of a mixture of experts over the JOB's micro-batch (docs/moe.md,
// "Balance over the job's micro-batch"), shared by every strategy that runs experts (TSP's
// weight ring and expert schedule, the mesh baselines). Each rank routes its own rows; the
// counts of chosen assignments per expert and the sums of p_e (2E doubles) are all-reduced
// over the token axis and then dp, so every rank computes moe_balance (moe.h) over the
// micro-batch's B*P*S tokens exactly as one device does, and the same gradient of it. Ranks
// that hold the same rows (the tp ranks of a mesh) are not summed over: they route alike.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/model/moe.h"
#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

class MoeJobBalance {
 public:
  explicit MoeJobBalance(const ModelConfig& config);

  // This micro-batch's share of the step's auxiliary loss (1 / micro-batches).
  void set_aux_weight(double weight) { aux_weight_ = weight; }
  // Collective over groups.tokens() x groups.dp(): layer l's routing of this rank's
  // local.rows rows (their logits [rows, E]) counted into the job's balance. Set, not added,
  // by each forward, so a recomputed forward counts once.
  void record(std::int64_t l, ParallelGroups& groups, const MoeDims& local,
              const MoeRouting& routing, const float* logits);
  // d loss / d p_e of every token of layer l (moe_balance_probability_grad over the job's
  // rows), for moe_router_backward.
  std::vector<double> probability_grad(std::int64_t l) const;
  // router_aux_loss_coef x the mean over the layers of each layer's balance; 0 when dense.
  double router_aux_loss() const;
  // The job's kept assignments per expert summed over the layers (dropless: the chosen ones).
  MoeLoad load() const;

 private:
  const ModelConfig& config_;
  std::vector<double> balance_;                    // per layer
  std::vector<std::vector<std::int64_t>> chosen_;  // per layer, [E]
  std::vector<std::int64_t> rows_;                 // per layer: the job's rows
  double aux_weight_ = 1.0;
};

}  // namespace origami::parallel
