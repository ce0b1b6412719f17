// Runs a kernel test once on every SIMD target that this build has and this CPU supports
// (kernels/simd.h), so that an AVX2 machine tests its AVX2 and SSE4 paths and an AVX-512
// machine its AVX-512 ones too. A suite derives its fixture from OnEverySimdTarget, writes
// TEST_P instead of TEST, and instantiates itself with ORIGAMI_ON_EVERY_SIMD_TARGET; each test
// is then named .../<target>, e.g. Simd/Attention.CausalOddLengths/avx2.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "origami/kernels/simd.h"

namespace origami::kernels::testing {

class OnEverySimdTarget : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { use_simd_target(GetParam()); }
  void TearDown() override { use_simd_target(""); }
};

#define ORIGAMI_ON_EVERY_SIMD_TARGET(Suite)                                         \
  INSTANTIATE_TEST_SUITE_P(Simd, Suite,                                             \
                           ::testing::ValuesIn(::origami::kernels::simd_targets()), \
                           [](const ::testing::TestParamInfo<std::string>& info) {  \
                             return info.param;                                     \
                           })

}  // namespace origami::kernels::testing
