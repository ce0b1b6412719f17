#include "origami/core/memory_tracker.h"

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/core/tensor.h"

namespace origami {
namespace {

TEST(MemoryTracker, CountsCurrentAndPeakPerCategoryAndTotal) {
  MemoryTracker t("rank 3");
  {
    Tensor a(t, MemCategory::Parameters, {10, 10});  // 400 B
    Tensor b(t, MemCategory::Activations, DType::BF16, {7});  // 14 B
    EXPECT_EQ(t.current(MemCategory::Parameters), 400);
    EXPECT_EQ(t.current(MemCategory::Activations), 14);
    EXPECT_EQ(t.current_total(), 414);
    {
      Tensor c(t, MemCategory::Activations, DType::F64, {3});  // 24 B
      EXPECT_EQ(t.peak(MemCategory::Activations), 38);
    }
    EXPECT_EQ(t.current(MemCategory::Activations), 14);
  }
  EXPECT_EQ(t.current_total(), 0);
  EXPECT_EQ(t.peak_total(), 438);
  EXPECT_EQ(t.peak(MemCategory::Parameters), 400);
  t.reset_peaks();
  EXPECT_EQ(t.peak_total(), 0);
}

TEST(MemoryTracker, PeakTotalIsPeakOfSumNotSumOfPeaks) {
  MemoryTracker t;
  { Tensor a(t, MemCategory::Logits, {100}); }
  { Tensor b(t, MemCategory::Workspace, {100}); }
  EXPECT_EQ(t.peak(MemCategory::Logits), 400);
  EXPECT_EQ(t.peak(MemCategory::Workspace), 400);
  EXPECT_EQ(t.peak_total(), 400);
}

TEST(MemoryTracker, CapRefusesOverBudgetAllocationNamingCategoryAndSizes) {
  MemoryTracker t("rank 1");
  t.set_cap(1000);
  Tensor a(t, MemCategory::Parameters, {200});  // 800 B
  try {
    Tensor b(t, MemCategory::Logits, {100});  // 400 B more: over
    FAIL() << "expected OutOfBudget";
  } catch (const OutOfBudget& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("logits"), std::string::npos) << msg;
    EXPECT_NE(msg.find("400 B"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1000 B"), std::string::npos) << msg;
  }
  // The refused allocation left no trace.
  EXPECT_EQ(t.current_total(), 800);
  EXPECT_EQ(t.current(MemCategory::Logits), 0);
  t.set_cap(std::nullopt);
  Tensor c(t, MemCategory::Logits, {100});
  EXPECT_EQ(t.current_total(), 1200);
}

TEST(MemoryTracker, UnbackedTrackerAccountsWithoutMemory) {
  MemoryTracker t;
  t.set_backs_memory(false);
  Tensor a(t, MemCategory::Activations, {1 << 20, 1 << 10});  // 4 GiB, never allocated
  EXPECT_FALSE(a.backed());
  EXPECT_EQ(t.current(MemCategory::Activations), std::int64_t{4} << 30);
}

TEST(MemoryTracker, ReportNamesEveryCategory) {
  MemoryTracker t;
  const std::string r = t.report();
  for (const char* name : {"parameters", "gradients", "optimizer state", "saved activations",
                           "communication buffers", "workspace", "logits", "total"}) {
    EXPECT_NE(r.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace origami
