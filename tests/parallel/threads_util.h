// Running a parity case over the threads transport (one process, one thread per rank).
#pragma once

#include <mutex>

#include <gtest/gtest.h>

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

inline parallel::ParallelConfig make_plan(int dp, int tp, int sp, bool seqpar = false,
                                          parallel::TokenLayoutKind layout =
                                              parallel::TokenLayoutKind::Zigzag) {
  parallel::ParallelConfig p;
  p.dp = dp;
  p.tp = tp;
  p.sp = sp;
  p.sequence_parallel = seqpar;
  p.layout = layout;
  return p;
}

// Loss, every gradient, the gradient norm, and (when the case takes steps) the step losses
// and final parameters of a parallel run against the single-device run.
inline void expect_equal(const Case& c, const Result& par, const Result& ref) {
  EXPECT_LE(relative_difference(par.loss, ref.loss), kGradTolerance)
      << c.name << ": loss " << par.loss << " vs " << ref.loss;
  ASSERT_EQ(par.grads.size(), ref.grads.size());
  for (std::size_t i = 0; i < ref.grads.size(); ++i) {
    ASSERT_EQ(par.names[i], ref.names[i]);
    ASSERT_EQ(par.grads[i].size(), ref.grads[i].size()) << ref.names[i];
    EXPECT_LE(relative_difference(par.grads[i], ref.grads[i]), kGradTolerance)
        << c.name << ": gradient of " << ref.names[i];
  }
  EXPECT_LE(relative_difference(par.grad_norm, ref.grad_norm), kGradTolerance) << c.name;
  ASSERT_EQ(par.step_losses.size(), ref.step_losses.size());
  for (std::size_t s = 0; s < ref.step_losses.size(); ++s)
    EXPECT_LE(relative_difference(par.step_losses[s], ref.step_losses[s]), kStepTolerance)
        << c.name << ": loss of step " << s + 1;
  ASSERT_EQ(par.params.size(), ref.params.size());
  for (std::size_t i = 0; i < ref.params.size(); ++i)
    EXPECT_LE(relative_difference(par.params[i], ref.params[i]), kStepTolerance)
        << c.name << ": parameter " << ref.names[i] << " after " << c.steps << " steps";
}

}  // namespace origami::parity
