// The inference parity subset over MPI processes (origami_mpirun 2 and 4): teacher-forced
// logits against the single device and generated tokens (greedy and every seeded sampler)
// equal to the single device's, zigzag and contiguous prefill. Rank 0 prints the gtest
// output; other ranks only their failures.
#include <gtest/gtest.h>

#include <cstdio>

#include <fmt/format.h>

#include "../infer_harness.h"
#include "origami/comm/mpi_transport.h"
#include "origami/comm/run_ranks.h"
#include "origami/kernels/threads.h"

namespace origami::infer_test {
namespace {

comm::Communicator* g_world = nullptr;

class InferMpi : public ::testing::TestWithParam<parallel::TokenLayoutKind> {};

TEST_P(InferMpi, TeacherForcedLogitsMatchTheSingleDevice) {
  kernels::set_thread_count(1);
  EXPECT_LE(teacher_forced_error(*g_world, GetParam()), 1e-5);
}

TEST_P(InferMpi, GeneratedTokensAreTheSingleDevices) {
  kernels::set_thread_count(1);
  std::vector<std::vector<std::vector<std::int32_t>>> want;
  comm::run_ranks(1, [&](comm::Communicator& one) {
    want = generate_all(one, parallel::TokenLayoutKind::Zigzag);
  });
  const auto got = generate_all(*g_world, GetParam());
  for (std::size_t s = 0; s < got.size(); ++s) EXPECT_EQ(got[s], want[s]) << "sampler " << s;
}

INSTANTIATE_TEST_SUITE_P(Layouts, InferMpi,
                         ::testing::Values(parallel::TokenLayoutKind::Zigzag,
                                           parallel::TokenLayoutKind::Contiguous),
                         [](const auto& info) { return parallel::token_layout_name(info.param); });

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

}  // namespace
}  // namespace origami::infer_test

int main(int argc, char** argv) {
  using namespace origami;
  ::testing::InitGoogleTest(&argc, argv);
  comm::MpiRuntime runtime;
  int rc = 0;
  {
    MemoryTracker tracker(fmt::format("rank {}", runtime.rank()));
    comm::Communicator world = runtime.world(tracker);
    infer_test::g_world = &world;
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (runtime.rank() != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new infer_test::FailurePrinter(runtime.rank()));
    }
    rc = RUN_ALL_TESTS();
    std::vector<std::int32_t> v = {rc};  // every rank's verdict counts
    world.all_reduce(v, v, comm::ReduceOp::Max);
    rc = v[0];
    if (runtime.rank() == 0)
      std::printf("MPI world of %d ranks: %s\n", runtime.size(),
                  rc == 0 ? "all ranks passed" : "a rank failed");
    infer_test::g_world = nullptr;
  }
  return rc;
}
