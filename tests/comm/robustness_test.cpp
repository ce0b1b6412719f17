// Timeouts, failing ranks, mismatched calls and bad input: clear errors, never a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "origami/comm/run_ranks.h"
#include "origami/comm/threads_transport.h"

namespace origami::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Robustness, StalledRankMakesTheOtherTimeOutWithinTheBoundAndTheLogNamesIt) {
  RunOptions o;
  o.timeout_s = 0.3;
  const auto t0 = Clock::now();
  std::string msg;
  try {
    run_ranks(2, [](Communicator& c) {
      std::vector<float> v(10, 1.f);
      c.all_reduce(v, v);  // both ranks once: the log has history
      if (c.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // stalls, never calls
        return;
      }
      c.all_reduce(v, v);
    }, o);
  } catch (const CommError& e) {
    msg = e.what();
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(msg.empty()) << "expected a CommError";
  EXPECT_NE(msg.find("rank 0: communication timeout after 0.3 s"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("peer 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Recent operations on rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("op=all_reduce seq=1 issue"), std::string::npos) << msg;
  EXPECT_NE(msg.find("op=all_reduce seq=0 done collective"), std::string::npos) << msg;
  EXPECT_LT(elapsed, 1.5 + 1.0);  // rank 1's sleep bounds the join
}

TEST(Robustness, TimeoutOnPointToPointNamesOperationRankAndPeer) {
  RunOptions o;
  o.timeout_s = 0.2;
  const std::string msg = message_of([&] {
    run_ranks(3, [](Communicator& c) {
      std::vector<float> v(5);
      if (c.rank() == 2) c.recv(v, 1, 9);  // rank 1 never sends...
      if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(800));  // ...and stalls
    }, o);
  });
  EXPECT_NE(msg.find("rank 2: communication timeout"), std::string::npos) << msg;
  EXPECT_NE(msg.find("recv (recv from peer 1 of 'world' (world rank 1), seq 0, 20 B)"),
            std::string::npos)
      << msg;
}

TEST(Robustness, AStallInASplitCommunicatorNamesThePeersWorldRank) {
  // Issue 14, item 11: "peer 0 of 'tp'" was world rank 2; the report says so.
  RunOptions o;
  o.timeout_s = 0.2;
  const std::string msg = message_of([&] {
    run_ranks(4, [](Communicator& w) {
      Communicator c = w.split(w.rank() % 2, w.rank(), "tp");  // {0, 2} and {1, 3}
      std::vector<float> v(5);
      if (w.rank() == 0) c.recv(v, 1, 9);  // waits on world rank 2, which never sends
      if (w.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    }, o);
  });
  EXPECT_NE(msg.find("peer 1 of 'tp' (world rank 2)"), std::string::npos) << msg;
}

TEST(Robustness, ARankThatThrowsMakesTheOthersFailFast) {
  RunOptions o;
  o.timeout_s = 60;  // must not be what ends the test
  const auto t0 = Clock::now();
  std::atomic<int> comm_errors{0};
  const std::string msg = message_of([&] {
    run_ranks(4, [&](Communicator& c) {
      if (c.rank() == 2) throw std::runtime_error("boom");
      std::vector<float> v(1000, 1.f);
      try {
        for (int i = 0; i < 100; ++i) c.all_reduce(v, v);
      } catch (const CommError& e) {
        if (std::string(e.what()).find("rank 2 failed: boom") != std::string::npos) comm_errors++;
        throw;
      }
    }, o);
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_EQ(msg.rfind("rank 2: boom", 0), 0u) << msg;
  EXPECT_EQ(comm_errors.load(), 3);
}

TEST(Robustness, ARankThatReturnsEarlyIsNamedAtOnce) {
  RunOptions o;
  o.timeout_s = 60;  // must not be what ends the test
  const auto t0 = Clock::now();
  const std::string msg = message_of([&] {
    run_ranks(3, [](Communicator& c) {
      if (c.rank() == 1) return;  // skips the all-reduce
      std::vector<float> v(10, 1.f);
      c.all_reduce(v, v);
    }, o);
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_NE(msg.find("world rank 1 (peer 1) has already returned from its function"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
}

TEST(Robustness, RunRanksKeepsTheErrorType) {
  EXPECT_THROW(run_ranks(2, [](Communicator& c) {
                 if (c.rank() == 1) throw ConfigError("bad config");
               }),
               ConfigError);
}

TEST(Robustness, MismatchedCountsAreReported) {
  RunOptions o;
  o.timeout_s = 5;
  const std::string msg = message_of([&] {
    run_ranks(2, [](Communicator& c) {
      std::vector<float> v(c.rank() == 0 ? 10 : 12, 1.f);
      c.all_reduce(v, v);
    }, o);
  });
  EXPECT_NE(msg.find("mismatched message"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
}

TEST(Robustness, MismatchedBroadcastCountsAreReported) {
  RunOptions o;
  o.timeout_s = 5;
  const std::string msg = message_of([&] {
    run_ranks(3, [](Communicator& c) {
      std::vector<double> v(c.rank() == 1 ? 7 : 8);
      c.broadcast(v, 0);
    }, o);
  });
  EXPECT_NE(msg.find("mismatched message"), std::string::npos) << msg;
}

TEST(Robustness, DroppingAPendingReceiveCancelsIt) {
  run_ranks(2, [](Communicator& c) {
    if (c.rank() == 1) {
      std::vector<float> v(4);
      { Handle h = c.irecv(v, 0, 5); }  // dropped before any send: withdrawn
      c.barrier();
      std::vector<float> w(4);
      c.recv(w, 0, 5);  // the send matches this one instead
      EXPECT_EQ(w[3], 7.f);
    } else {
      std::vector<float> v(4, 7.f);
      c.barrier();
      c.send(v, 1, 5);
    }
  });
}

TEST(Robustness, TimeoutFromTheEnvironment) {
  ::setenv("ORIGAMI_COMM_TIMEOUT_S", "2.5", 1);
  EXPECT_DOUBLE_EQ(default_timeout_s(), 2.5);
  run_ranks(1, [](Communicator& c) { EXPECT_DOUBLE_EQ(c.timeout(), 2.5); });
  ::setenv("ORIGAMI_COMM_TIMEOUT_S", "soon", 1);
  EXPECT_THROW(default_timeout_s(), ConfigError);
  // now() + inf (or + 1e20 s) overflows the clock: a deadline already past.
  for (const char* huge : {"inf", "1e20", "nan"}) {
    ::setenv("ORIGAMI_COMM_TIMEOUT_S", huge, 1);
    EXPECT_THROW(default_timeout_s(), ConfigError) << huge;
  }
  ::setenv("ORIGAMI_COMM_TIMEOUT_S", "1e6", 1);
  EXPECT_DOUBLE_EQ(default_timeout_s(), 1e6);
  ::unsetenv("ORIGAMI_COMM_TIMEOUT_S");
  EXPECT_DOUBLE_EQ(default_timeout_s(), 120.0);
}

TEST(BadInput, IsRefusedWithAClearMessage) {
  run_ranks(3, [](Communicator& c) {
    std::vector<float> a(6), b(5);
    std::vector<double> d(6);
    auto has = [&](const std::function<void()>& f, const char* what) {
      const std::string m = message_of(f);
      EXPECT_NE(m.find(what), std::string::npos) << "expected '" << what << "' in: " << m;
    };
    has([&] { c.broadcast(a, 3); }, "root 3 is outside the group of size 3");
    has([&] { c.reduce(a, a, -1); }, "root -1 is outside the group of size 3");
    has([&] { c.send(a, 7, 0); }, "destination 7 is outside the group");
    has([&] { c.send(a, 1, -2); }, "tag -2");
    has([&] { c.all_reduce(a, b); }, "input has 6 elements, output 5");
    has([&] { c.all_reduce(a, d); }, "input is F32 but output is F64");
    has([&] { c.all_gather(a, b); }, "output has 5 elements, expected 18");
    has([&] { c.reduce_scatter(a, a); }, "output has 6 elements, expected 2");
    has([&] { c.all_gatherv(a, b, {1, 2}); }, "counts has 2 entries, expected 3");
    std::vector<std::uint16_t> h(4);
    has([&] { c.all_reduce(Buffer(h.data(), 4, DType::F16), Buffer(h.data(), 4, DType::F16)); },
        "not supported for dtype F16");
    has([&] {
      c.all_reduce(Buffer(h.data(), 4, DType::BF16), Buffer(h.data(), 4, DType::BF16),
                   ReduceOp::Max);
    }, "'max' is not supported for dtype BF16");
    has([&] { c.all_reduce(Buffer(nullptr, 4, DType::F32), Buffer(nullptr, 4, DType::F32)); }, "no memory");
    has([&] { c.split(-1, 0); }, "color must be >= 0");
    has([&] { c.set_timeout(0); }, "timeout must be positive");
    // Nothing above reached the transport: the communicator still works.
    std::vector<float> v(4, 1.f);
    c.all_reduce(v, v);
    EXPECT_EQ(v[0], 3.f);
  });
}

TEST(ThreadsWorld, AbortFailsLaterPostsImmediately) {
  auto w = ThreadsWorld::create(2);
  w->abort("test abort");
  MemoryTracker t;
  Communicator c = Communicator::world(w->transport(0), t);
  std::vector<float> v(3);
  const std::string m = message_of([&] { c.send(v, 1, 0); });
  EXPECT_NE(m.find("test abort"), std::string::npos) << m;
}

}  // namespace
}  // namespace origami::comm
