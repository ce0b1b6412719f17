// The communication tests over MPI processes: the same closed-form checks as the threads
// tests (tests/comm/checks.h) on the world and on mesh sub-groups, bytes against the
// formulas, real progress, the link model, timeouts and mismatches. Run by CTest as
// `origami_mpirun N test_comm_mpi` for several N; one mpirun runs every case. Rank 0 prints
// the usual gtest output; other ranks print only their failures, prefixed with the rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "../checks.h"
#include "../mpi_test_main.h"
#include "origami/comm/mesh.h"
#include "origami/comm/mpi_transport.h"

namespace origami::comm {
namespace {

MpiRuntime* g_runtime = nullptr;
Communicator* g_world = nullptr;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double compute_for(double seconds) {
  const auto t0 = Clock::now();
  double acc = 0;
  while (seconds_since(t0) < seconds) {
    for (int i = 0; i < 10000; ++i) acc += std::sqrt(static_cast<double>(i) + acc * 1e-9);
  }
  return acc;
}

TEST(Mpi, EveryOperationGivesTheClosedFormAnswer) { testing::check_everything(*g_world); }

TEST(Mpi, MeasuredBytesEqualTheFormulas) { testing::check_bytes_equal_formulas(*g_world); }

TEST(Mpi, MessagesOfSeveralChunksArriveWhole) {
  // The MPI transport moves messages in 1 MiB chunks: odd sizes around and above that.
  for (std::int64_t count : {std::int64_t{262144}, std::int64_t{262145}, std::int64_t{1000003}}) {
    testing::check_p2p(*g_world, count, true);
    testing::check_p2p(*g_world, count, false);
  }
  testing::check_all_gather(*g_world, 300001, true);
  testing::check_all_reduce<double>(*g_world, 200001, ReduceOp::Sum, true);
}

TEST(Mpi, MeshSubGroups) {
  Communicator& w = *g_world;
  const int n = w.size();
  // 2x2 on four ranks, 2x3 on six, otherwise n x 1 and 1 x n.
  const int s0 = n == 4 || n == 6 ? 2 : n;
  const int s1 = n / s0;
  DeviceMesh m(w, fmt::format("dp={},tsp={}", s0, s1));
  EXPECT_EQ(m.coord("dp"), w.rank() / s1);
  EXPECT_EQ(m.coord("tsp"), w.rank() % s1);
  for (int k = 0; k < s1; ++k) EXPECT_EQ(m.axis("tsp").world_rank_of(k), (w.rank() / s1) * s1 + k);
  testing::check_everything(m.axis("dp"));
  testing::check_everything(m.axis("tsp"));
  testing::check_bytes_equal_formulas(m.axis("tsp"));
  EXPECT_THROW(DeviceMesh(w, fmt::format("dp={}", n + 1)), ConfigError);
}

TEST(Mpi, PostedReceiveCompletesWhileTheReceiverComputes) {
  Communicator& c = *g_world;
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> buf(1 << 18, static_cast<float>(c.rank()));
  c.barrier();  // ranks leave the previous test at different times
  if (c.rank() == 0) {
    c.send(buf, 1, 3);
  } else if (c.rank() == 1) {
    Handle h = c.irecv(buf, 0, 3);
    volatile double sink = compute_for(0.5);
    (void)sink;
    EXPECT_TRUE(h.test()) << "the receive did not progress while rank 1 computed";
    h.wait();
    EXPECT_EQ(buf.back(), 0.f);
  }
  c.barrier();
}

TEST(Mpi, ThreeOutstandingOperationsCompleteInAnyOrder) {
  Communicator& c = *g_world;
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> big(8 << 20), mid(1 << 14), small(3);
  if (c.rank() == 0) {
    for (auto& x : big) x = 1.f;
    for (auto& x : mid) x = 2.f;
    for (auto& x : small) x = 3.f;
    std::vector<std::int32_t> go(1);
    c.recv(go, 1, 9);  // the receiver has posted all three
    Handle a = c.isend(big, 1, 0);
    Handle b = c.isend(mid, 1, 1);
    Handle s = c.isend(small, 1, 2);
    s.wait();
    b.wait();
    a.wait();
  } else if (c.rank() == 1) {
    std::atomic<int> order{0};
    int done_big = -1, done_small = -1;
    Handle a = c.irecv(big, 0, 0);
    a.then([&] { done_big = order++; });
    Handle b = c.irecv(mid, 0, 1);
    Handle s = c.irecv(small, 0, 2);
    s.then([&] { done_small = order++; });
    std::vector<std::int32_t> go(1);
    c.send(go, 0, 9);
    s.wait();
    b.wait();
    a.wait();
    EXPECT_EQ(small[2], 3.f);
    EXPECT_EQ(mid.back(), 2.f);
    EXPECT_EQ(big.back(), 1.f);
    EXPECT_LT(done_small, done_big) << "the 32 MiB message held the 12-byte one behind it";
  }
  c.barrier();
}

TEST(Mpi, LinkModelOverlapsTransferWithCompute) {
  Communicator& c = *g_world;
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  LinkModel link;
  link.enabled = true;
  link.intra_alpha_s = 0;
  link.intra_beta_Bps = 4e6 / 0.4;  // 4 MB in 0.4 s
  g_runtime->set_link_model(link);
  std::vector<float> buf(1000000);
  if (c.rank() == 0) {
    const auto t0 = Clock::now();
    c.send(buf, 1, 0);
    EXPECT_GE(seconds_since(t0), 0.4 - 1e-3) << "the link model did not hold the send";
  } else if (c.rank() == 1) {
    const auto t0 = Clock::now();
    Handle h = c.irecv(buf, 0, 0);
    volatile double sink = compute_for(0.4);
    (void)sink;
    h.wait();
    const double total = seconds_since(t0);
    EXPECT_GE(total, 0.4 - 1e-3);
    EXPECT_LT(total, 0.6) << "transfer and compute did not overlap";
  }
  g_runtime->set_link_model(LinkModel{});
  c.barrier();
}

TEST(Mpi, StalledPeerTimesOutWithRankPeerAndLog) {
  Communicator& w = *g_world;
  if (w.size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicator c = w.split(w.rank() < 2 ? 0 : 1, 0, "pair");
  c.set_timeout(0.3);
  if (w.rank() == 0) {
    std::vector<float> v(5);
    const auto t0 = Clock::now();
    try {
      c.recv(v, 1, 4);  // rank 1 never sends
      ADD_FAILURE() << "expected a timeout";
    } catch (const CommError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("communication timeout after 0.3 s"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0 of communicator 'pair'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("recv (recv from peer 1 of 'pair' (world rank 1), seq 0, 20 B)"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("Recent operations on rank 0"), std::string::npos) << msg;
      EXPECT_NE(msg.find("comm=pair op=recv seq=0 post recv bytes=20 peer=1"), std::string::npos) << msg;
    }
    EXPECT_LT(seconds_since(t0), 0.3 + 1.0);
  }
  w.barrier();
}

TEST(Mpi, MismatchedSizesAreReported) {
  Communicator& w = *g_world;
  if (w.size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicator c = w.split(w.rank() < 2 ? 0 : 1, 0, "pair");
  c.set_timeout(10);
  if (w.rank() == 0) {
    std::vector<float> v(3, 1.f);
    c.send(v, 1, 4);
    std::vector<float> small(2, 1.f);
    c.send(small, 1, 5);
  } else if (w.rank() == 1) {
    std::vector<float> v(2);
    try {
      c.recv(v, 0, 4);  // 12 B arrive, 8 B expected
      ADD_FAILURE() << "expected a mismatch";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("mismatched message"), std::string::npos) << e.what();
    }
    std::vector<float> big(3);
    try {
      c.recv(big, 0, 5);  // 8 B arrive, 12 B expected
      ADD_FAILURE() << "expected a mismatch";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("expected 12 B"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("received 8 B"), std::string::npos) << e.what();
    }
  }
  w.barrier();
}

// Prints only failures, prefixed with the rank (ranks other than 0).

}  // namespace
}  // namespace origami::comm

int main(int argc, char** argv) {
  using namespace origami::comm;
  int fail_rank = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--origami-fail-rank=", 20) == 0) fail_rank = std::atoi(argv[i] + 20);
  }
  if (fail_rank >= 0) {
    // A rank that throws: the job must end with a clear message, not hang.
    return mpi_main([&](Communicator& c) {
      if (c.rank() == fail_rank) throw origami::Error(fmt::format("deliberate failure of rank {}", fail_rank));
      std::vector<float> v(10, 1.f);
      for (int i = 0; i < 1000; ++i) c.all_reduce(v, v);
      return 0;
    });
  }
  ::testing::InitGoogleTest(&argc, argv);
  MpiRuntime runtime;
  g_runtime = &runtime;
  return origami::mpi_test::run_all_tests_on_every_rank(runtime,
                                                        [](Communicator* world) { g_world = world; });
}
