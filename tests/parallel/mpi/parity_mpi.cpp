// A representative subset of the parity matrix over MPI processes: the same harness as the
// threads matrix (../harness.h), each case run when the world has its size. CTest runs
// `origami_mpirun 2 test_parallel_mpi` and `origami_mpirun 4 test_parallel_mpi`. Rank 0 prints
// the usual gtest output; other ranks print only their failures.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>

#include <fmt/format.h>

#include "../harness.h"
#include "../../comm/mpi_test_main.h"
#include "origami/comm/mpi_transport.h"
#include "origami/kernels/threads.h"

namespace origami::parity {
namespace {

comm::Communicator* g_world = nullptr;

parallel::ParallelConfig plan(
    int dp, int tp, int sp, bool seqpar = false,
    parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag) {
  parallel::ParallelConfig p;
  p.dp = dp;
  p.tp = tp;
  p.sp = sp;
  p.sequence_parallel = seqpar;
  p.layout = layout;
  return p;
}

std::vector<Case> cases() {
  const ModelConfig mha = make_model(100, 64, 96, 4, 4), gqa = make_model(97, 64, 96, 4, 2);
  std::vector<Case> v;
  auto add = [&](std::string name, ModelConfig m, parallel::ParallelConfig p, Recompute r,
                 int steps) {
    Case c;
    c.name = std::move(name);
    c.model = m;
    c.plan = p;
    c.recompute = r;
    c.steps = steps;
    c.max_grad_norm = 1.0;
    v.push_back(c);
  };
  // world 2
  add("dp2", mha, plan(2, 1, 1), Recompute::None, 0);
  add("tp2_gqa_steps", gqa, plan(1, 2, 1), Recompute::None, 5);
  add("tpsp2_mlp", mha, plan(1, 2, 1, true), Recompute::Mlp, 0);
  add("sp2_zigzag_full", gqa, plan(1, 1, 2), Recompute::Full, 0);
  // world 4
  add("tp2xsp2_steps", mha, plan(1, 2, 2), Recompute::None, 5);
  add("dp2xtpsp2", gqa, plan(2, 2, 1, true), Recompute::None, 0);
  add("sp4_contiguous_mlp", mha, plan(1, 1, 4, false, parallel::TokenLayoutKind::Contiguous),
      Recompute::Mlp, 0);
  add("tp4", mha, plan(1, 4, 1), Recompute::Full, 0);
  // TSP (tsp_ops.h): its point-to-point ring hops and broadcasts over MPI.
  auto tsp = [&](int dp, int d, parallel::TokenLayoutKind layout) {
    parallel::ParallelConfig p = plan(dp, 1, 1, false, layout);
    p.tsp = d;
    return p;
  };
  add("tsp2_gqa_steps", gqa, tsp(1, 2, parallel::TokenLayoutKind::Zigzag), Recompute::None, 5);
  add("tsp2_contiguous_full", mha, tsp(1, 2, parallel::TokenLayoutKind::Contiguous),
      Recompute::Full, 0);
  add("tsp4_zigzag_steps", mha, tsp(1, 4, parallel::TokenLayoutKind::Zigzag), Recompute::Mlp, 5);
  // Micro-batch 1 per replica (batch 2 over dp 2), five AdamW steps.
  add("dp2xtsp2", gqa, tsp(2, 2, parallel::TokenLayoutKind::Contiguous), Recompute::None, 5);
  // The optimizer state sharded over dp (--shard-optimizer): its reduce-scatter and
  // all-gathers over MPI, against one device (world 2).
  add("dp2_zero1_steps", gqa, plan(2, 1, 1), Recompute::None, 5);
  v.back().shard_optimizer = true;
  // Kv heads replicated over 2 ranks (2 kv heads, degree 4): the kv-replica groups over MPI.
  add("tp4_kvrep2_steps", gqa, plan(1, 4, 1), Recompute::None, 5);
  add("tsp4_kvrep2_steps", gqa, tsp(1, 4, parallel::TokenLayoutKind::Zigzag), Recompute::Full, 5);
  // Pipeline stages (rank_model_pipeline.cpp): the boundary sends between processes, 1F1B over
  // 3 micro-batches of 5 layers split unevenly; pp 2 alone (world 2) and pp 2 x tsp 2 (world 4);
  // and interleaved 1F1B at pp 2 (world 2).
  const ModelConfig five = make_model(97, 32, 48, 4, 2, 5);
  auto staged = [](parallel::ParallelConfig p, std::vector<std::int64_t> layers) {
    p.pp = static_cast<int>(layers.size());
    p.pp_layers = std::move(layers);
    return p;
  };
  add("pp2_m3_steps", five, staged(plan(1, 1, 1), {3, 2}), Recompute::None, 5);
  add("pp2xtsp2_m3_steps", five, staged(tsp(1, 2, parallel::TokenLayoutKind::Zigzag), {2, 3}),
      Recompute::Mlp, 5);
  // TSP's expert schedule (docs/moe.md): the token rows' all-to-alls between processes and
  // the whole experts' gradients summed over dp only; 4 experts top-2 on dp 2 x tsp 2, five
  // AdamW steps (world 4).
  ModelConfig experts = gqa;
  experts.num_local_experts = 4;
  experts.num_experts_per_tok = 2;
  experts.router_aux_loss_coef = 0.1;
  parallel::ParallelConfig expert_plan = tsp(2, 2, parallel::TokenLayoutKind::Zigzag);
  expert_plan.moe_schedule = parallel::MoeSchedule::Expert;
  add("moe_expert_dp2xtsp2_steps", experts, expert_plan, Recompute::None, 5);
  // The mesh's experts (strategies/mesh/mesh_moe.cpp): each expert sharded over tp, d routing
  // weight summed over tp, the balance over dp, between processes (world 4).
  add("moe_dp2xtp2_steps", experts, plan(2, 2, 1), Recompute::None, 5);
  // A mixture of experts in pipeline stages (docs/moe.md, "Pipeline stages"): pp 2 x tsp 2
  // (the weight ring), 3 micro-batches in flight, the aux loss and the expert load summed over
  // the stages between processes (world 4).
  add("moe_pp2xtsp2_m3_steps", with_experts(five, 4, 2),
      staged(tsp(1, 2, parallel::TokenLayoutKind::Zigzag), {3, 2}), Recompute::None, 5);
  // Interleaved 1F1B (two chunks a rank, 1,2,1,1 layers): the last rank's chunk 1 sends to
  // rank 0's chunk 2, over 4 micro-batches (a multiple of pp).
  parallel::ParallelConfig interleaved = staged(plan(1, 1, 1), {1, 2, 1, 1});
  interleaved.pp = 2;
  interleaved.pp_virtual = 2;
  add("pp2_virtual2_m4_steps", five, interleaved, Recompute::None, 5);
  // At pp 4 (world 4): 1F1B over 3 micro-batches (m < p, uneven 1,2,1,1), interleaved over 8
  // layers (one a chunk; the last rank's chunk 3 feeds rank 0's chunk 4) at m = p, and
  // interleaved pp 2 under the baselines' sp 2 (each stage's rows sequence-sharded).
  add("pp4_m3_steps", five, staged(plan(1, 1, 1), {1, 2, 1, 1}), Recompute::None, 5);
  parallel::ParallelConfig interleaved4 = plan(1, 1, 1);
  interleaved4.pp = 4;
  interleaved4.pp_virtual = 2;
  add("pp4_virtual2_m4_steps", make_model(97, 32, 48, 4, 2, 8), interleaved4, Recompute::None, 5);
  parallel::ParallelConfig interleaved_sp = plan(1, 1, 2);
  interleaved_sp.pp = 2;
  interleaved_sp.pp_virtual = 2;
  add("pp2xsp2_virtual2_m4_steps", five, interleaved_sp, Recompute::Mlp, 5);
  // pp 3 (world 3): 1F1B over 3 micro-batches (m = p) of the 5 layers split 1,3,1, and
  // interleaved over 6 layers (one a chunk) at m = p.
  add("pp3_m3_steps", five, staged(plan(1, 1, 1), {1, 3, 1}), Recompute::None, 5);
  parallel::ParallelConfig interleaved3 = plan(1, 1, 1);
  interleaved3.pp = 3;
  interleaved3.pp_virtual = 2;
  add("pp3_virtual2_m3_steps", make_model(97, 32, 48, 4, 2, 6), interleaved3, Recompute::Full,
      5);
  for (Case& c : v)
    if (c.plan.pp > 1)  // interleaving: the largest multiple of pp up to 4 (pp 3: 3)
      c.micro = c.plan.pp_virtual > 1 ? std::max(c.plan.pp, 4 / c.plan.pp * c.plan.pp) : 3;
  return v;
}

class ParityMpi : public ::testing::TestWithParam<Case> {};

TEST_P(ParityMpi, EqualsOneDevice) {
  const Case& c = GetParam();
  if (c.plan.world() != g_world->size()) GTEST_SKIP() << "needs " << c.plan.world() << " ranks";
  kernels::set_thread_count(1);
  const Data d = make_data(c, c.steps + 1);
  const Result par = run_parallel(c, d, *g_world);
  expect_equal(c, par, run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Subset, ParityMpi, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });


}  // namespace
}  // namespace origami::parity

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  origami::comm::MpiRuntime runtime;
  return origami::mpi_test::run_all_tests_on_every_rank(
      runtime, [](origami::comm::Communicator* world) { origami::parity::g_world = world; });
}
