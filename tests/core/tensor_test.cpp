#include "origami/core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace origami {
namespace {

TEST(Tensor, CarriesDtypeShapeAndExactBytes) {
  MemoryTracker t;
  Tensor a(t, MemCategory::Workspace, DType::BF16, {3, 5});
  EXPECT_EQ(a.dtype(), DType::BF16);
  EXPECT_EQ(a.numel(), 15);
  EXPECT_EQ(a.bytes(), 30);
  EXPECT_EQ(a.dim(-1), 5);
  EXPECT_THROW(a.f32(), Error);  // wrong element type
  Tensor b(t, MemCategory::Workspace, DType::F64, {2});
  EXPECT_EQ(b.bytes(), 16);
}

TEST(Tensor, StartsZeroedAndClonesIndependently) {
  MemoryTracker t;
  Tensor a(t, MemCategory::Parameters, {4});
  for (float v : a.span()) EXPECT_EQ(v, 0.0f);
  a.f32()[2] = 7.0f;
  Tensor b = a.clone(MemCategory::Gradients);
  b.f32()[2] = 1.0f;
  EXPECT_EQ(a.f32()[2], 7.0f);
  EXPECT_EQ(t.current(MemCategory::Gradients), 16);
}

// The VmFlags line of the mapping of /proc/self/smaps that holds `address` ("" if none).
std::string vm_flags_at(const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= a && a < hi;
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

// Tensors of 4 MiB and more start on a 2-MiB boundary and ask for transparent huge pages
// (madvise: decode streams every weight once per token, core/tensor.cpp); smaller ones do not.
TEST(Tensor, LargeTensorsAskForHugePages) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  MemoryTracker t;
  // 20 MiB and 12 bytes: not a whole number of huge pages (C11's aligned_alloc, as the
  // sanitizers hold it, would refuse such a size at a 2-MiB alignment).
  Tensor large(t, MemCategory::Parameters, {(std::int64_t{5} << 20) + 3});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.raw()) % (std::uintptr_t{2} << 20), 0u);
  EXPECT_NE(vm_flags_at(large.raw()).find(" hg"), std::string::npos)
      << vm_flags_at(large.raw());
  for (float v : large.span()) ASSERT_EQ(v, 0.0f);
  Tensor small(t, MemCategory::Parameters, {1000});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.raw()) % 64, 0u);
}

TEST(Tensor, MoveTransfersOwnershipAndAccountingOnce) {
  MemoryTracker t;
  Tensor a(t, MemCategory::Parameters, {8});
  Tensor b = std::move(a);
  EXPECT_FALSE(a.defined());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(t.current_total(), 32);
  b = Tensor(t, MemCategory::Parameters, {2});
  EXPECT_EQ(t.current_total(), 8);
}

TEST(Tensor, ReshapeKeepsElementsAndRefusesWrongCount) {
  MemoryTracker t;
  Tensor a(t, MemCategory::Workspace, {2, 6});
  a.reshape({3, 4});
  EXPECT_EQ(a.dim(0), 3);
  EXPECT_THROW(a.reshape({5}), Error);
  EXPECT_THROW(Tensor(t, MemCategory::Workspace, {-1, 2}), Error);
}

TEST(Tensor, ZeroSizeTensorIsValid) {
  MemoryTracker t;
  Tensor a(t, MemCategory::Workspace, {0, 3});
  EXPECT_EQ(a.numel(), 0);
  EXPECT_TRUE(a.backed());
  a.zero();
}

}  // namespace
}  // namespace origami
