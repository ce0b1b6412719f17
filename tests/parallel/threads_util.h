// Running a parity case over the threads transport (one process, one thread per rank).
#pragma once

#include <mutex>

#include "harness.h"
#include "origami/comm/run_ranks.h"
#include "origami/parallel/registry.h"

namespace origami::parity {

// World rank 0's result (every rank gathers the same full tensors).
inline Result run_threads(const Case& c, const Data& d) {
  Result out;
  std::mutex m;
  comm::run_ranks(c.plan.world(), [&](comm::Communicator& world) {
    Result r = run_parallel(c, d, world);
    if (world.rank() == 0) {
      std::lock_guard lock(m);
      out = std::move(r);
    }
  });
  return out;
}

inline parallel::ParallelConfig make_plan(
    int dp, int tp, int sp, bool seqpar = false,
    parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag) {
  parallel::ParallelConfig p;
  p.dp = dp;
  p.tp = tp;
  p.sp = sp;
  p.sequence_parallel = seqpar;
  p.layout = layout;
  return p;
}

// dp x tsp=D: TSP's one axis of D ranks (degree 1: the single-device mesh).
inline parallel::ParallelConfig make_tsp_plan(
    int dp, int D, parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag) {
  parallel::ParallelConfig p;
  p.dp = dp;
  p.tsp = D;
  p.layout = layout;
  return p;
}

// Strategy `name` at `degree` ranks of its registered degree axis.
inline parallel::ParallelConfig strategy_at(
    const std::string& name, int degree,
    parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag) {
  return parallel::make_parallel_config(name, degree, "", false, layout);
}

// The registered strategies with a degree whose plan at degree 2 satisfies `applies`: the
// values of a suite instantiated per strategy (a new strategy joins by registering).
inline std::vector<std::string> strategies_where(
    bool (*applies)(const parallel::ParallelConfig&)) {
  std::vector<std::string> out;
  for (const parallel::StrategyInfo& s : parallel::registered_strategies())
    if (!s.degree_axis.empty() && applies(strategy_at(s.name, 2))) out.push_back(s.name);
  return out;
}
// The fp32 initialisation every run of a case starts from (run_parallel's seed, one device).
inline std::vector<std::vector<float>> initial_parameters(const Case& c) {
  std::vector<std::vector<float>> out;
  comm::run_ranks(1, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, make_plan(1, 1, 1));
    parallel::RankModel model(c.model, groups, c.seq, Recompute::None, world.tracker(), kSeed);
    for (const NamedTensor& p : named_tensors(model.params())) out.push_back(to_vector(*p.tensor));
  });
  return out;
}

inline bool any_strategy(const parallel::ParallelConfig&) { return true; }
inline bool splits_tokens(const parallel::ParallelConfig& p) { return p.token_degree() > 1; }
inline bool shards_weights(const parallel::ParallelConfig& p) { return p.weight_degree() > 1; }
inline bool replicates_weights(const parallel::ParallelConfig& p) {
  return p.weight_degree() == 1;
}
inline std::string strategy_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace origami::parity
