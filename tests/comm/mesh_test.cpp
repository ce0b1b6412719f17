// DeviceMesh: parsing, row-major layout, and every operation on the axis communicators of
// 2x2 and 2x3 meshes (threads transport).
#include <gtest/gtest.h>

#include "checks.h"
#include "origami/comm/mesh.h"
#include "origami/comm/run_ranks.h"

namespace origami::comm {
namespace {

TEST(Mesh, ParsesAxesInOrder) {
  auto a = parse_mesh("dp=1,tp=2,sp=2");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].name, "dp");
  EXPECT_EQ(a[2].size, 2);
}

TEST(Mesh, RefusesMalformedSpecs) {
  for (const char* bad : {"", "dp", "dp=", "dp=0", "dp=-1", "dp=2,dp=2", "=2", "dp=2,", "d p=2", "dp=x"}) {
    EXPECT_THROW(parse_mesh(bad), ConfigError) << bad;
  }
}

TEST(Mesh, RefusesAProductOtherThanTheWorldSize) {
  try {
    run_ranks(6, [](Communicator& c) { DeviceMesh m(c, "dp=2,tsp=4"); });
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("has 8 devices"), std::string::npos) << msg;
    EXPECT_NE(msg.find("world has 6 ranks"), std::string::npos) << msg;
  }
}

void check_mesh(int world, const char* spec, const char* a0, int s0, const char* a1, int s1) {
  run_ranks(world, [&](Communicator& w) {
    DeviceMesh m(w, spec);
    const int r = w.rank();
    // Row-major: the last axis varies fastest.
    EXPECT_EQ(m.coord(a0), r / s1);
    EXPECT_EQ(m.coord(a1), r % s1);
    auto& c0 = m.axis(a0);
    auto& c1 = m.axis(a1);
    EXPECT_EQ(c0.size(), s0);
    EXPECT_EQ(c1.size(), s1);
    EXPECT_EQ(c0.rank(), m.coord(a0));
    EXPECT_EQ(c1.rank(), m.coord(a1));
    for (int k = 0; k < s1; ++k) EXPECT_EQ(c1.world_rank_of(k), (r / s1) * s1 + k);
    for (int k = 0; k < s0; ++k) EXPECT_EQ(c0.world_rank_of(k), k * s1 + r % s1);
    EXPECT_EQ(c1.name(), a1);
    testing::check_everything(c0);
    testing::check_everything(c1);
    testing::check_bytes_equal_formulas(c1);
    // Interleaved use of both axes (different groups, different ids) does not cross messages.
    std::vector<float> x(7, 1.f), y(7, 1.f);
    Handle h0 = c0.iall_reduce(x, x);
    Handle h1 = c1.iall_reduce(y, y);
    h1.wait();
    h0.wait();
    EXPECT_EQ(x[6], static_cast<float>(s0));
    EXPECT_EQ(y[6], static_cast<float>(s1));
  });
}

TEST(Mesh, TwoByTwo) { check_mesh(4, "dp=2,tp=2", "dp", 2, "tp", 2); }
TEST(Mesh, TwoByThree) { check_mesh(6, "dp=2,tsp=3", "dp", 2, "tsp", 3); }

TEST(Mesh, ThreeAxesWithASizeOneAxis) {
  run_ranks(4, [](Communicator& w) {
    DeviceMesh m(w, "dp=1,tp=2,sp=2");
    EXPECT_EQ(m.axis("dp").size(), 1);
    EXPECT_EQ(m.axis("tp").size(), 2);
    EXPECT_EQ(m.coord("tp"), w.rank() / 2);
    EXPECT_EQ(m.coord("sp"), w.rank() % 2);
    testing::check_all_reduce<float>(m.axis("dp"), 5, ReduceOp::Sum, true);
    testing::check_all_reduce<float>(m.axis("sp"), 5, ReduceOp::Sum, true);
    EXPECT_THROW(m.axis("pp"), ConfigError);
  });
}

TEST(Split, OrdersByKeyThenRank) {
  run_ranks(5, [](Communicator& w) {
    // Even and odd ranks, keys reversed.
    Communicator c = w.split(w.rank() % 2, -w.rank());
    const int members = w.rank() % 2 == 0 ? 3 : 2;
    EXPECT_EQ(c.size(), members);
    EXPECT_EQ(c.world_rank_of(0), w.rank() % 2 == 0 ? 4 : 3);
    testing::check_everything(c);
  });
}

}  // namespace
}  // namespace origami::comm
