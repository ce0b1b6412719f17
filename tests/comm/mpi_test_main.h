// The main of a GoogleTest program that runs on every rank of an MPI job (tests/comm/mpi,
// tests/parallel/mpi, tests/infer/mpi): each rank runs every test on the world communicator;
// rank 0 prints the usual report, the other ranks only their failures, prefixed with their
// rank; the program fails on every rank if any rank failed.
#pragma once

#include <cstdio>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "origami/comm/mpi_transport.h"
#include "origami/core/memory_tracker.h"

namespace origami::mpi_test {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// After ::testing::InitGoogleTest: hands the world communicator to the tests through
// `bind` (null again once they ran) and returns the job's verdict.
inline int run_all_tests_on_every_rank(comm::MpiRuntime& runtime,
                                       const std::function<void(comm::Communicator*)>& bind) {
  MemoryTracker tracker(fmt::format("rank {}", runtime.rank()));
  comm::Communicator world = runtime.world(tracker);
  bind(&world);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (runtime.rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(runtime.rank()));
  }
  int rc = RUN_ALL_TESTS();
  std::vector<std::int32_t> v = {rc};  // every rank's verdict counts
  world.all_reduce(v, v, comm::ReduceOp::Max);
  rc = v[0];
  if (runtime.rank() == 0)
    std::printf("MPI world of %d ranks: %s\n", runtime.size(),
                rc == 0 ? "all ranks passed" : "a rank failed");
  bind(nullptr);
  return rc;
}

}  // namespace origami::mpi_test
