#include "origami/kernels/threads.h"

#include <omp.h>

#include <thread>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/kernels/gemm.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

TEST(Threads, SetAppliesToTheCallingThreadAndToOpenMP) {
  testing::ThreadCountScope scope(2);
  EXPECT_EQ(thread_count(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  set_thread_count(1);
  EXPECT_EQ(thread_count(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
}

TEST(Threads, RejectsFewerThanOne) {
  EXPECT_THROW(set_thread_count(0), Error);
  EXPECT_THROW(set_thread_count(-3), Error);
}

TEST(Threads, EachCallingThreadHasItsOwnCount) {
  testing::ThreadCountScope scope(2);
  int seen_default = 0, seen_after_set = 0, omp_after_set = 0;
  std::thread other([&] {
    seen_default = thread_count();  // a new rank starts at 1, not at the creator's count
    set_thread_count(3);
    seen_after_set = thread_count();
    omp_after_set = omp_get_max_threads();
  });
  other.join();
  EXPECT_EQ(seen_default, 1);
  EXPECT_EQ(seen_after_set, 3);
  EXPECT_EQ(omp_after_set, 3);
  EXPECT_EQ(thread_count(), 2);  // untouched by the other thread
  EXPECT_EQ(omp_get_max_threads(), 2);
}

TEST(Threads, GemmFromAThreadThatNeverSetACountUsesOneThread) {
  // OpenMP's default for a new thread is every core; the GEMM must not start such a pool.
  int omp_threads = 0;
  std::thread rank([&] {
    float a = 2.0f, b = 3.0f, c = 0.0f;
    gemm(Trans::N, Trans::N, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    omp_threads = omp_get_max_threads();
    EXPECT_EQ(c, 6.0f);
  });
  rank.join();
  EXPECT_EQ(omp_threads, 1);
}

}  // namespace
}  // namespace origami::kernels
