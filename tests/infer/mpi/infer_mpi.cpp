// The inference parity subset over MPI processes (origami_mpirun 2 and 4): teacher-forced
// logits against the single device and generated tokens (greedy and every seeded sampler)
// equal to the single device's, zigzag and contiguous prefill; teacher-forced logits with each
// kv head replicated over two processes. Rank 0 prints the gtest
// output; other ranks only their failures.
#include <gtest/gtest.h>

#include <cstdio>

#include <fmt/format.h>

#include "../infer_harness.h"
#include "../../comm/mpi_test_main.h"
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

// Kv heads replicated across processes: world / 2 kv heads (np 2: 1, np 4: 2), so D = 2·Hkv
// and each kv head, with its KV cache, lives on two processes.
TEST(InferMpiReplicatedKv, TeacherForcedLogitsMatchTheSingleDevice) {
  kernels::set_thread_count(1);
  const std::int64_t kv_heads = g_world->size() / 2;
  for (const auto layout :
       {parallel::TokenLayoutKind::Zigzag, parallel::TokenLayoutKind::Contiguous})
    EXPECT_LE(teacher_forced_error(*g_world, layout, false, kv_heads), 1e-5)
        << parallel::token_layout_name(layout);
}

}  // namespace
}  // namespace origami::infer_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  origami::comm::MpiRuntime runtime;
  return origami::mpi_test::run_all_tests_on_every_rank(
      runtime, [](origami::comm::Communicator* world) { origami::infer_test::g_world = world; });
}
