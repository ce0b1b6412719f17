#include "origami/core/tensor.h"

#include <gtest/gtest.h>

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
