// Running a parity case over the threads transport (one process, one thread per rank).
#pragma once

#include <mutex>

#include "harness.h"
#include "origami/comm/run_ranks.h"

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

}  // namespace origami::parity
