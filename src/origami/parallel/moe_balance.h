// The load-balancing term of a mixture of experts over the JOB's micro-batch (docs/moe.md,
// "Balance over the job's micro-batch"), shared by every strategy that runs experts (TSP's
// weight ring and expert schedule, the mesh baselines). Each rank routes its own rows; the
// counts of chosen assignments per expert and the sums of p_e (2E doubles) are all-reduced
// over the token axis and then dp, so every rank computes moe_balance (moe.h) over the
// micro-batch's B*P*S tokens exactly as one device does, and the same gradient of it. Ranks
// that hold the same rows (the tp ranks of a mesh) are not summed over: they route alike.
// The records are kept per pass (set_pass): a pipeline stage runs several micro-batches'
// forwards before their backwards (1F1B), and each backward reads its own forward's counts.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "origami/model/moe.h"
#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

class MoeJobBalance {
 public:
  explicit MoeJobBalance(const ModelConfig& config);
  MoeJobBalance(const MoeJobBalance&) = delete;  // pass_ points into passes_
  MoeJobBalance& operator=(const MoeJobBalance&) = delete;

  // This micro-batch's share of the step's auxiliary loss (1 / micro-batches).
  void set_aux_weight(double weight) { aux_weight_ = weight; }
  // The pass whose records the next record / probability_grad / router_aux_loss / load use:
  // the driver's key of its saved state (a pipeline pass of micro-batch i through chunk c:
  // c * m + i; 0 without stages, one micro-batch after another). A pass's records stay until
  // the same key's next forward overwrites them.
  void set_pass(int id);
  // Collective over groups.tokens() x groups.dp(): layer l's routing of this rank's
  // local.rows rows (their logits [rows, E]) counted into the job's balance. Set, not added,
  // by each forward, so a recomputed forward counts once.
  void record(std::int64_t l, ParallelGroups& groups, const MoeDims& local,
              const MoeRouting& routing, const float* logits);
  // d loss / d p_e of every token of layer l (moe_balance_probability_grad over the job's
  // rows), for moe_router_backward. Divided by the model's layer count, wherever the layer's
  // stage is.
  std::vector<double> probability_grad(std::int64_t l) const;
  // router_aux_loss_coef x (the sum of the pass's recorded layers' balances) / the model's
  // layer count: the mean over the layers when the pass ran them all, the pass's share of it
  // when it ran a pipeline chunk's (the chunks' shares add up to the mean); 0 when dense.
  double router_aux_loss() const;
  // The job's kept and dropped assignments per expert summed over the pass's layers.
  MoeLoad load() const;

 private:
  struct Pass {  // per layer of the model (a chunk's pass records its own layers only)
    explicit Pass(std::size_t layers)
        : balance(layers, 0.0), chosen(layers), load(layers), rows(layers, 0) {}
    std::vector<double> balance;
    std::vector<std::vector<std::int64_t>> chosen;  // [E] each
    std::vector<MoeLoad> load;                      // empty: not recorded
    std::vector<std::int64_t> rows;                 // the job's rows
  };

  const ModelConfig& config_;
  std::map<int, Pass> passes_;  // by pass id; the map keeps each Pass in place
  Pass* pass_ = nullptr;  // the current pass (pass 0 until set_pass)
  double aux_weight_ = 1.0;
};

}  // namespace origami::parallel
