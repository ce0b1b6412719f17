// The parity matrix on the threads transport: every strategy (the baselines and TSP) against
// the single-device model (LlamaModel, itself proven equal to PyTorch): the loss and every
// gathered gradient (per tensor ||a-b||/||b|| <= 1e-5), and for a subset five AdamW steps with
// clipping (losses and parameters, per tensor <= 1e-4).
//   * the registry sweep: every registered strategy (parallel/registry.h) at degrees 2, 3 and
//     4, one recompute policy each, so that a new strategy is compared by registering it;
//   * the head_dim sweep: every registered strategy at D = 2 on a model whose heads x head_dim
//     (64) is not its hidden size (48), with chosen cases at D = 3, 4 (headdim_*);
//   * the kv-replication sweep: every registered weight-sharding strategy (degree axis tp or
//     tsp) at D = 2 Hkv and 4 Hkv on a model with 2 kv heads (8 query heads), each kv head
//     replicated over D / Hkv ranks;
//   * the chosen cases: strategy x degree 1..4 (3 on a model with 6 heads, 8 for TSP), zigzag
//     and contiguous, grouped-query attention x degree, B = 1, 2, 4, gradient accumulation,
//     each recompute policy x strategy, TP+SP meshes and dp x strategy; vocabularies not
//     divisible by the degree (97 at 2, 4, 8; 100 at 3, 8); tied embeddings under every
//     registered strategy (and TP+SP, dp x tsp, TSP at 3 and 8); TSP's allgather schedule in
//     both sweeps and a few chosen cases (contiguous, accumulation, dp, tied); mixture-of-
//     experts models under TSP, both schedules (moe_*, moe_expert_*: D 2, 3, 4, dp x tsp,
//     forced routing), and under the mesh strategies (moe_single, moe_dp*, moe_tp*, moe_sp*).
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/registry.h"
#include "../sanitizers.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::ParallelConfig;
using parallel::TokenLayoutKind;

// Models: "mha" 4 heads; "gqa" 4 heads over 2 kv heads, vocabulary 97 (prime: padded at
// every degree > 1); "gqa4" 8 heads over 4 kv heads; "six" 6 heads / 3 kv heads (degree 3;
// vocabulary 100 not divisible by 3); "eight" 8 heads / 8 kv heads (degree 8).
ModelConfig mha() {
  return make_model(100, 64, 96, 4, 4);
}
ModelConfig gqa() {
  return make_model(97, 64, 96, 4, 2);
}
ModelConfig gqa4() {
  return make_model(97, 64, 96, 8, 4);
}
ModelConfig six() {
  return make_model(100, 48, 96, 6, 3);
}
ModelConfig eight() {
  return make_model(100, 64, 96, 8, 8);
}
// "kv2": 8 query heads over 2 kv heads, so that D = 4 and 8 replicate each kv head over 2 and
// 4 ranks.
ModelConfig kv2() {
  return make_model(97, 64, 96, 8, 2);
}

// An explicit head_dim (Hugging Face's head_dim != hidden_size / num_attention_heads):
// "headdim" 4 heads x 16 over 2 kv heads, q width 64 and kv width 32 beside hidden 48 (wider
// than hidden; 2 kv heads replicated at D = 4); "headdim_narrow" 6 heads x 6 over 3 kv heads,
// q width 36 below hidden 48 (degree 3). Any place that takes the head size as hidden / heads
// reads 12 or 8 values per head instead and fails.
ModelConfig headdim() {
  ModelConfig m = make_model(97, 48, 96, 4, 2);
  m.explicit_head_dim = 16;
  return m;
}
ModelConfig headdim_narrow() {
  ModelConfig m = make_model(100, 48, 96, 6, 3);
  m.explicit_head_dim = 6;
  return m;
}
// Hidden 60, not a multiple of the 4 heads (only an explicit head_dim allows it): nothing
// may split hidden by heads.
ModelConfig headdim_hidden60() {
  ModelConfig m = make_model(97, 60, 96, 4, 2);
  m.explicit_head_dim = 16;
  return m;
}

// The same model with one table for the embedding and the LM head.
ModelConfig tied(ModelConfig m) {
  m.tie_word_embeddings = true;
  return m;
}

ParallelConfig plan(int dp, int tp, int sp, bool seqpar = false,
                    TokenLayoutKind layout = TokenLayoutKind::Zigzag) {
  return make_plan(dp, tp, sp, seqpar, layout);
}
ParallelConfig tsp(int dp, int d, TokenLayoutKind layout = TokenLayoutKind::Zigzag) {
  return make_tsp_plan(dp, d, layout);
}
constexpr auto kContig = TokenLayoutKind::Contiguous;

std::vector<Case> matrix() {
  std::vector<Case> v;
  auto add = [&](std::string name, ModelConfig m, ParallelConfig p, Recompute r = Recompute::None,
                 std::int64_t B = 2, int micro = 1, std::int64_t seq = 24) {
    Case c;
    c.name = std::move(name);
    c.model = m;
    c.plan = p;
    c.recompute = r;
    c.batch = B;
    c.micro = micro;
    c.seq = seq;
    v.push_back(c);
  };
  // The registry sweep: each registered strategy with a degree, at 2, 3 and 4.
  const Recompute policies[] = {Recompute::Mlp, Recompute::Full, Recompute::None};
  // Each of a strategy's schedules (TSP's broadcast-ring and allgather) is swept; a
  // schedule other than the first is named after the strategy ("tsp_allgather").
  auto schedules_of = [](const parallel::StrategyInfo& s) {
    std::vector<std::pair<std::string, parallel::TspSchedule>> out;
    for (parallel::TspSchedule k : s.schedules)
      out.emplace_back(k == s.schedules.front() ? s.name
                                                : s.name + "_" + parallel::tsp_schedule_name(k),
                       k);
    if (out.empty()) out.emplace_back(s.name, parallel::TspSchedule::BroadcastRing);
    return out;
  };
  for (const parallel::StrategyInfo& s : parallel::registered_strategies()) {
    if (s.degree_axis.empty()) continue;
    for (const auto& [name, schedule] : schedules_of(s))
      for (int d = 2; d <= 4; ++d) {
        const ModelConfig m = d == 3 ? six() : d == 2 ? gqa() : mha();
        ParallelConfig p =
            parallel::make_parallel_config(s.name, d, "", false, TokenLayoutKind::Zigzag);
        p.tsp_schedule = schedule;
        const Recompute r = policies[d - 2];
        add(fmt::format("registry_{}{}_{}", name, d, recompute_name(r)), m, p, r,
            s.name == "dp" ? 2 * d : 2);
      }
  }
  // The head_dim sweep: every registered strategy (each schedule) at D = 2 on the headdim
  // model.
  for (const parallel::StrategyInfo& s : parallel::registered_strategies()) {
    if (s.degree_axis.empty()) continue;
    for (const auto& [name, schedule] : schedules_of(s)) {
      ParallelConfig p =
          parallel::make_parallel_config(s.name, 2, "", false, TokenLayoutKind::Zigzag);
      p.tsp_schedule = schedule;
      add(fmt::format("registry_headdim_{}2", name), headdim(), p, Recompute::None,
          s.name == "dp" ? 4 : 2);
    }
  }
  // The kv-replication sweep: D = 2 Hkv and 4 Hkv for each strategy that shards the weights.
  for (const parallel::StrategyInfo& s : parallel::registered_strategies()) {
    if (s.degree_axis != "tp" && s.degree_axis != "tsp") continue;
    for (const auto& [name, schedule] : schedules_of(s))
      for (int d : {4, 8}) {
        ParallelConfig p =
            parallel::make_parallel_config(s.name, d, "", false, TokenLayoutKind::Zigzag);
        p.tsp_schedule = schedule;
        const Recompute r = d == 4 ? Recompute::Mlp : Recompute::Full;
        add(fmt::format("registry_kvrep_{}{}_{}", name, d, recompute_name(r)), kv2(), p, r, 2, 1,
            32);
      }
  }
  // An explicit head_dim at D = 3 and 4: TSP 3 zigzag (narrow q), both TSP schedules with kv
  // replication, TP+SP 2x2 with and without regions, dp x tsp, SP 3, recompute, tied; and a
  // hidden size that is no multiple of the heads.
  auto allgather_of = [](ParallelConfig p) {
    p.tsp_schedule = parallel::TspSchedule::Allgather;
    return p;
  };
  add("headdim_single", headdim(), plan(1, 1, 1));
  add("headdim_tsp3_zigzag", headdim_narrow(), tsp(1, 3), Recompute::Mlp);
  add("headdim_tsp3_allgather_contiguous", headdim_narrow(), allgather_of(tsp(1, 3, kContig)));
  add("headdim_tsp4_kvrep2", headdim(), tsp(1, 4), Recompute::Full);
  add("headdim_tsp4_allgather_kvrep2", headdim(), allgather_of(tsp(1, 4)));
  add("headdim_tp4_kvrep2", headdim(), plan(1, 4, 1));
  add("headdim_tp2xsp2", headdim(), plan(1, 2, 2));
  add("headdim_tpsp2xsp2_full", headdim(), plan(1, 2, 2, true), Recompute::Full);
  add("headdim_sp3_contiguous", headdim_narrow(), plan(1, 1, 3, false, kContig));
  add("headdim_dp2xtsp2", headdim(), tsp(2, 2));
  add("headdim_tied_tsp2", tied(headdim()), tsp(1, 2));
  add("headdim_tied_tp2", tied(headdim()), plan(1, 2, 1));
  add("headdim_hidden60_tsp2", headdim_hidden60(), tsp(1, 2));
  add("headdim_hidden60_tsp4_allgather", headdim_hidden60(), allgather_of(tsp(1, 4)));
  add("headdim_hidden60_tpsp2", headdim_hidden60(), plan(1, 2, 1, true));
  add("headdim_hidden60_tp2xsp2", headdim_hidden60(), plan(1, 2, 2));
  // The generic driver on one rank, every policy.
  add("single", mha(), plan(1, 1, 1));
  add("single_mlp", gqa(), plan(1, 1, 1), Recompute::Mlp);
  add("single_full", gqa(), plan(1, 1, 1), Recompute::Full);
  // DP.
  add("dp2", mha(), plan(2, 1, 1));
  add("dp4_B4", gqa(), plan(4, 1, 1), Recompute::None, 4);
  add("dp2_full", mha(), plan(2, 1, 1), Recompute::Full);
  // TP: degrees 1..4, GQA, padding vocabulary, recompute.
  add("tp2", mha(), plan(1, 2, 1));
  add("tp3", six(), plan(1, 3, 1));
  add("tp4", mha(), plan(1, 4, 1));
  add("tp2_gqa", gqa(), plan(1, 2, 1));
  add("tp2_mlp", mha(), plan(1, 2, 1), Recompute::Mlp);
  add("tp2_gqa_full_accum", gqa(), plan(1, 2, 1), Recompute::Full, 2, 2);
  // TP-SP.
  add("tpsp2", mha(), plan(1, 2, 1, true));
  add("tpsp3", six(), plan(1, 3, 1, true));
  add("tpsp4", mha(), plan(1, 4, 1, true), Recompute::None, 1);
  add("tpsp2_gqa_mlp", gqa(), plan(1, 2, 1, true), Recompute::Mlp);
  add("tpsp2_full", mha(), plan(1, 2, 1, true), Recompute::Full);
  // SP (context parallel): zigzag and contiguous at each degree.
  add("sp2_zigzag", mha(), plan(1, 1, 2));
  add("sp2_contiguous", mha(), plan(1, 1, 2, false, kContig));
  add("sp3_zigzag", six(), plan(1, 1, 3));
  add("sp3_contiguous", six(), plan(1, 1, 3, false, kContig));
  add("sp4_zigzag_gqa", gqa(), plan(1, 1, 4));
  add("sp4_contiguous_gqa", gqa(), plan(1, 1, 4, false, kContig));
  add("sp2_mlp", gqa(), plan(1, 1, 2), Recompute::Mlp);
  add("sp2_full_accum", mha(), plan(1, 1, 2, false, kContig), Recompute::Full, 2, 2);
  // TP+SP on a 2x2 mesh, with and without sequence-parallel regions.
  add("tp2xsp2_zigzag", mha(), plan(1, 2, 2));
  add("tp2xsp2_contiguous_gqa", gqa(), plan(1, 2, 2, false, kContig));
  add("tpsp2xsp2_full", mha(), plan(1, 2, 2, true), Recompute::Full);
  // DP on an outer axis of each strategy.
  add("dp2xtp2", gqa(), plan(2, 2, 1));
  add("dp2xtpsp2_mlp", mha(), plan(2, 2, 1, true), Recompute::Mlp);
  add("dp2xsp2", mha(), plan(2, 1, 2));
  // TSP: degrees 2..4 and 8 (tsp at degree 1 is the degree-1 mesh, "single"), both layouts, GQA, B
  // = 1 and 4, every policy, dp x tsp.
  add("tsp2_zigzag", mha(), tsp(1, 2));
  add("tsp2_contiguous", mha(), tsp(1, 2, kContig));
  add("tsp2_gqa", gqa(), tsp(1, 2));
  add("tsp3_zigzag", six(), tsp(1, 3));
  add("tsp3_contiguous", six(), tsp(1, 3, kContig));
  add("tsp4_zigzag", mha(), tsp(1, 4));
  add("tsp4_contiguous_gqa", gqa4(), tsp(1, 4, kContig));
  add("tsp4_gqa_B4", gqa4(), tsp(1, 4), Recompute::None, 4);
  add("tsp4_B1", mha(), tsp(1, 4), Recompute::None, 1);
  add("tsp8_zigzag", eight(), tsp(1, 8), Recompute::None, 2, 1, 32);
  add("tsp8_contiguous", eight(), tsp(1, 8, kContig), Recompute::None, 1, 1, 32);
  add("tsp2_mlp", gqa(), tsp(1, 2), Recompute::Mlp);
  add("tsp4_full", mha(), tsp(1, 4), Recompute::Full);
  add("tsp3_mlp_contiguous", six(), tsp(1, 3, kContig), Recompute::Mlp);
  add("tsp2_full_accum", gqa(), tsp(1, 2), Recompute::Full, 2, 2);
  add("dp2xtsp2", mha(), tsp(2, 2));
  add("dp2xtsp2_gqa_full", gqa(), tsp(2, 2, kContig), Recompute::Full, 4);
  // Kv heads replicated (D = 2 Hkv, 4 Hkv): TP, TP-SP, TP+SP, TSP, under dp, accumulation.
  add("tp4_kvrep2", gqa(), plan(1, 4, 1));
  add("tp8_kvrep4", kv2(), plan(1, 8, 1));
  add("tpsp4_kvrep2_full", gqa(), plan(1, 4, 1, true), Recompute::Full);
  add("tpsp8_kvrep4", kv2(), plan(1, 8, 1, true), Recompute::None, 2, 1, 32);
  add("tp4xsp2_kvrep2", kv2(), plan(1, 4, 2));
  add("tpsp4xsp2_kvrep2_contiguous", kv2(), plan(1, 4, 2, true, kContig));
  add("dp2xtp4_kvrep2", gqa(), plan(2, 4, 1));
  add("tsp4_kvrep2", gqa(), tsp(1, 4));
  add("tsp4_kvrep2_contiguous_accum", gqa(), tsp(1, 4, kContig), Recompute::None, 2, 2);
  add("tsp8_kvrep4", kv2(), tsp(1, 8), Recompute::None, 2, 1, 32);
  add("tsp8_kvrep4_mlp_B1", kv2(), tsp(1, 8, kContig), Recompute::Mlp, 1, 1, 32);
  add("dp2xtsp4_kvrep2_full", gqa(), tsp(2, 4), Recompute::Full, 4);
  // TSP's allgather schedule beyond the registry sweep: contiguous, accumulation with full
  // recompute, dp x tsp, tied embeddings.
  auto allgather = [](ParallelConfig p) {
    p.tsp_schedule = parallel::TspSchedule::Allgather;
    return p;
  };
  add("tsp3_allgather_contiguous", six(), allgather(tsp(1, 3, kContig)));
  add("tsp2_allgather_full_accum", gqa(), allgather(tsp(1, 2)), Recompute::Full, 2, 2);
  add("dp2xtsp2_allgather_mlp", mha(), allgather(tsp(2, 2)), Recompute::Mlp);
  add("tied_tsp4_allgather", tied(mha()), allgather(tsp(1, 4)));
  // Tied embeddings: every registered strategy at degree 2 (vocabulary 97, padded) and 4,
  // so that the table's two gradients meet on its owner (TP: the vocab-parallel lookup and
  // head; TSP: the lookup's all-to-all and the head ring's GradRing) or add before the dp/sp
  // sum; TP+SP, TP-SP+SP and dp x each sharded strategy.
  for (const parallel::StrategyInfo& s : parallel::registered_strategies()) {
    if (s.degree_axis.empty()) continue;
    for (int d : {2, 4}) {
      const ParallelConfig p =
          parallel::make_parallel_config(s.name, d, "", false, TokenLayoutKind::Zigzag);
      add(fmt::format("tied_{}{}", s.name, d), tied(d == 2 ? gqa() : mha()), p, Recompute::None,
          s.name == "dp" ? 2 * d : 2);
    }
  }
  add("tied_single", tied(gqa()), plan(1, 1, 1));
  add("tied_tp2xsp2", tied(gqa()), plan(1, 2, 2));
  add("tied_tpsp2xsp2_full", tied(mha()), plan(1, 2, 2, true), Recompute::Full);
  add("tied_dp2xtp2", tied(gqa()), plan(2, 2, 1));
  add("tied_dp2xtsp2", tied(gqa()), tsp(2, 2));
  add("tied_tsp3_contiguous_mlp", tied(six()), tsp(1, 3, kContig), Recompute::Mlp);
  add("tied_tsp8", tied(eight()), tsp(1, 8), Recompute::None, 2, 1, 32);
  add("tied_tsp2_full_accum", tied(gqa()), tsp(1, 2), Recompute::Full, 2, 2);
  // Mixture of experts under TSP's weight ring: every expert's shard rings as the dense
  // MLP's, at D = 2, 3 (5 experts: the ring takes any E), 4; top-1 and top-2; every recompute
  // policy; gradient accumulation (the auxiliary loss per micro-batch); dp x tsp (the balance
  // over the job's micro-batch); and a zero router (every token picks experts 0 .. k-1: all
  // the same expert at k = 1, experts without a token at k = 2).
  add("moe_tsp2", with_experts(gqa(), 4, 2), tsp(1, 2));
  add("moe_tsp3_e5_mlp", with_experts(six(), 5, 2), tsp(1, 3), Recompute::Mlp);
  add("moe_tsp4_e8_top1_full", with_experts(gqa(), 8, 1), tsp(1, 4), Recompute::Full);
  add("moe_tsp2_accum", with_experts(gqa(), 4, 2), tsp(1, 2, kContig), Recompute::None, 2, 2);
  add("moe_dp2xtsp2", with_experts(gqa(), 4, 2), tsp(2, 2));
  add("moe_tsp2_one_expert", with_experts(gqa(), 4, 1), tsp(1, 2));
  v.back().zero_router = true;
  add("moe_tsp4_idle_experts", with_experts(gqa(), 4, 2), tsp(1, 4));
  v.back().zero_router = true;
  // The expert schedule (--moe-schedule expert): E/D whole experts per rank, token rows by
  // all-to-all. D = 2 and 4, E = 4 and 8 (one and two experts a rank at D = 4), top-1 and
  // top-2, dp x tsp, every recompute policy (mlp: the rows sent again; full: the forward
  // re-run), accumulation, and the zero-router fixtures (every token on expert 0, owned by
  // rank 0; experts 2, 3 and so ranks 2, 3 without a token). Under the sanitizers the ones
  // the steps use and the two fixtures.
  auto expert = [](ParallelConfig p) {
    p.moe_schedule = parallel::MoeSchedule::Expert;
    return p;
  };
  add("moe_expert_tsp2", with_experts(gqa(), 4, 2), expert(tsp(1, 2)));
  add("moe_expert_tsp4_e8_top1_full", with_experts(gqa(), 8, 1), expert(tsp(1, 4)),
      Recompute::Full);
  add("moe_expert_dp2xtsp2", with_experts(gqa(), 4, 2), expert(tsp(2, 2)));
  add("moe_expert_tsp2_one_expert", with_experts(gqa(), 4, 1), expert(tsp(1, 2)));
  v.back().zero_router = true;
  add("moe_expert_tsp4_idle_experts", with_experts(gqa(), 4, 2), expert(tsp(1, 4)));
  v.back().zero_router = true;
  // The mesh strategies (strategies/mesh/mesh_moe.cpp): the single device's expert blocks on
  // the degree-1 mesh (`--strategy single`), dp (the balance over both replicas), tp (each
  // expert sharded as the dense MLP, d routing weight summed over tp), TP-SP regions, sp (the
  // tokens split, the balance over sp) and dp x tp; top-1 and top-2, every recompute policy,
  // accumulation, and the zero-router fixtures (k = 1: every token on expert 0; k = 2:
  // experts 2 and 3 idle).
  add("moe_single", with_experts(gqa(), 4, 2), plan(1, 1, 1));
  add("moe_dp2", with_experts(gqa(), 4, 2), plan(2, 1, 1));
  add("moe_tp2", with_experts(gqa(), 4, 2), plan(1, 2, 1));
  add("moe_sp2_top1", with_experts(mha(), 4, 1), plan(1, 1, 2));
  add("moe_dp2xtp2_top1", with_experts(gqa(), 4, 1), plan(2, 2, 1));
  add("moe_tp2_full", with_experts(gqa(), 4, 2), plan(1, 2, 1), Recompute::Full);
  add("moe_tp2_one_expert", with_experts(gqa(), 4, 1), plan(1, 2, 1));
  v.back().zero_router = true;
  add("moe_sp2_idle_experts", with_experts(mha(), 4, 2), plan(1, 1, 2));
  v.back().zero_router = true;
  // A capacity where every rank routes the job's whole micro-batch (single, tp, TP-SP): 0.75
  // keeps at most 3/4 of the assignments, so at least a quarter are dropped.
  add("moe_single_capacity", with_capacity(with_experts(gqa(), 4, 2), 0.75), plan(1, 1, 1));
  add("moe_tp2_capacity", with_capacity(with_experts(gqa(), 4, 2), 0.75), plan(1, 2, 1));
#ifndef ORIGAMI_TESTS_SANITIZED
  add("moe_single_e5_top1_mlp", with_experts(six(), 5, 1), plan(1, 1, 1), Recompute::Mlp);
  add("moe_dp2_accum", with_experts(gqa(), 4, 2), plan(2, 1, 1), Recompute::None, 2, 2);
  add("moe_dp2xtp2", with_experts(gqa(), 4, 2), plan(2, 2, 1));
  add("moe_tp4_e8_top2", with_experts(gqa(), 8, 2), plan(1, 4, 1));
  add("moe_tpsp2_mlp", with_experts(mha(), 4, 2), plan(1, 2, 1, true), Recompute::Mlp);
  add("moe_sp2_contiguous_full", with_experts(gqa(), 4, 2), plan(1, 1, 2, false, kContig),
      Recompute::Full);
  add("moe_sp4_top2", with_experts(gqa(), 4, 2), plan(1, 1, 4));
  add("moe_dp2xsp2", with_experts(mha(), 4, 2), plan(2, 1, 2));
  add("moe_tp2xsp2", with_experts(gqa(), 4, 2), plan(1, 2, 2));
  add("moe_tpsp2_capacity_full", with_capacity(with_experts(mha(), 4, 1), 0.75),
      plan(1, 2, 1, true), Recompute::Full);
  add("moe_tpsp2xsp2_mlp", with_experts(mha(), 4, 2), plan(1, 2, 2, true), Recompute::Mlp);
  add("moe_dp2xtpsp2", with_experts(mha(), 4, 2), plan(2, 2, 1, true));
#endif
#ifndef ORIGAMI_TESTS_SANITIZED
  add("moe_expert_tsp4_e4_top2_mlp", with_experts(gqa(), 4, 2), expert(tsp(1, 4)),
      Recompute::Mlp);
  add("moe_expert_tsp2_e8_top1", with_experts(gqa(), 8, 1), expert(tsp(1, 2, kContig)));
  add("moe_expert_tsp2_accum_mlp", with_experts(gqa(), 4, 2), expert(tsp(1, 2)), Recompute::Mlp,
      2, 2);
#endif
  return v;
}

class Parity : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

TEST_P(Parity, LossAndEveryGradientEqualOneDevice) {
  const Case& c = GetParam();
  const Data d = make_data(c, 1);
  expect_equal(c, run_threads(c, d), run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Matrix, Parity, ::testing::ValuesIn(matrix()), case_name);

// Five AdamW steps (weight decay, clipping on) give the same losses and parameters.
std::vector<Case> step_cases() {
  std::vector<Case> v;
  for (Case c : matrix()) {
    static const std::vector<std::string> chosen = {"single",      "dp2",
                                                    "tp2_gqa",     "tpsp2",
                                                    "sp2_zigzag",  "tp2xsp2_zigzag",
                                                    "dp2xtp2",     "sp2_full_accum",
                                                    "tsp2_zigzag", "tsp3_contiguous",
                                                    "tsp4_gqa_B4", "tsp2_full_accum",
                                                    "dp2xtsp2",    "tp4_kvrep2",
                                                    "tp8_kvrep4",  "tpsp8_kvrep4",
                                                    "tsp4_kvrep2", "tsp8_kvrep4",
                                                    "dp2xtsp4_kvrep2_full",
                                                    "tied_single",
                                                    "tied_dp2",    "tied_tp2",
                                                    "tied_tpsp4",  "tied_sp2",
                                                    "tied_tsp2",   "tied_tsp4",
                                                    "tied_dp2xtsp2",
                                                    "registry_tsp_allgather4_none",
                                                    "registry_headdim_tsp2",
                                                    "headdim_tp2xsp2",
                                                    // Not the zero-router cases: their
                                                    // exact ties survive an update only up
                                                    // to rounding, which then routes apart.
                                                    "moe_tsp2",    "moe_dp2xtsp2",
                                                    "moe_tsp3_e5_mlp",
                                                    "moe_tsp4_e8_top1_full",
                                                    "moe_expert_tsp2",
                                                    "moe_expert_dp2xtsp2",
                                                    "moe_expert_tsp4_e8_top1_full",
                                                    "moe_single",  "moe_dp2",
                                                    "moe_tp2",     "moe_sp2_top1",
                                                    "moe_dp2xtp2_top1",
                                                    "moe_single_capacity",
                                                    "moe_tp2_capacity"};
    if (std::find(chosen.begin(), chosen.end(), c.name) == chosen.end()) continue;
    c.steps = 5;
    c.max_grad_norm = 1.0;
    v.push_back(c);
  }
  return v;
}

// Packed documents (harness.h packed_lengths: a one-token document, documents shorter than a
// chunk, documents crossing chunks, ranks and rows): the registry sweep at D = 2, 3, 4 and
// chosen cases of every axis and layout, loss and every gradient against one device.
std::vector<Case> packed_cases() {
  std::vector<Case> v;
  static const std::vector<std::string> chosen = {
      "single",         "single_full", "tp2_gqa",     "tpsp2",           "sp2_contiguous",
      "sp4_zigzag_gqa", "sp2_full_accum", "tp2xsp2_zigzag", "tsp2_contiguous", "tsp3_zigzag",
      "tsp4_gqa_B4",    "tsp2_full_accum", "tsp8_zigzag", "dp2xtsp2"};
  for (Case c : matrix()) {
    if (c.name.rfind("registry_", 0) != 0 &&
        std::find(chosen.begin(), chosen.end(), c.name) == chosen.end())
      continue;
    c.name = "packed_" + c.name;
    c.packed = true;
    v.push_back(c);
  }
  return v;
}

class ParityPacked : public Parity {};

TEST_P(ParityPacked, LossAndEveryGradientEqualOneDevice) {
  const Case& c = GetParam();
  const Data d = make_data(c, 1);
  expect_equal(c, run_threads(c, d), run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Matrix, ParityPacked, ::testing::ValuesIn(packed_cases()), case_name);

// The balanced layout (--layout balanced, parallel/balanced_layout.h) on the same packed rows:
// each micro-batch's chunks assigned by its documents' work, so a rank holds chunks in an
// order neither zigzag nor contiguous gives (balanced_layout_test.cpp checks that for these
// rows). SP, TP+SP (with and without regions) and TSP at D = 2, 3, 4; gradient accumulation
// (two micro-batches, two assignments), recompute and dp x tsp (two replicas, two
// assignments), TSP's allgather schedule at D = 3. S = 48: 16, 24 and 16 chunks of 3, 2 and 3 tokens. Under the sanitizers one
// case per token-splitting family.
std::vector<Case> balanced_cases() {
  constexpr auto kBalanced = TokenLayoutKind::Balanced;
  std::vector<Case> v;
  auto add = [&](std::string name, ModelConfig m, ParallelConfig p, Recompute r = Recompute::None,
                 std::int64_t B = 2, int micro = 1) {
    Case c;
    c.name = "balanced_" + std::move(name);
    c.model = m;
    c.plan = p;
    c.recompute = r;
    c.batch = B;
    c.micro = micro;
    c.seq = 48;
    c.packed = true;
    v.push_back(c);
  };
  add("sp2", mha(), plan(1, 1, 2, false, kBalanced));
  add("tp2xsp2", mha(), plan(1, 2, 2, false, kBalanced));
  add("tsp3", six(), tsp(1, 3, kBalanced), Recompute::Mlp);
#ifndef ORIGAMI_TESTS_SANITIZED
  add("sp3", six(), plan(1, 1, 3, false, kBalanced), Recompute::Full);
  add("sp4_gqa", gqa(), plan(1, 1, 4, false, kBalanced));
  add("tpsp2xsp2_full", mha(), plan(1, 2, 2, true, kBalanced), Recompute::Full);
  add("tp2xsp3", mha(), plan(1, 2, 3, false, kBalanced), Recompute::None, 1);
  add("tp2xsp4", mha(), plan(1, 2, 4, false, kBalanced), Recompute::None, 1);
  add("tsp2_accum", gqa(), tsp(1, 2, kBalanced), Recompute::None, 2, 2);
  add("tsp4", mha(), tsp(1, 4, kBalanced));
  add("tsp4_full_B1", gqa4(), tsp(1, 4, kBalanced), Recompute::Full, 1);
  // Experts on the balanced chunks: each rank routes its own rows, the balance is their sum.
  add("moe_sp2", with_experts(mha(), 4, 2), plan(1, 1, 2, false, kBalanced));
  add("dp2xtsp2", mha(), tsp(2, 2, kBalanced));
  ParallelConfig allgather = tsp(1, 3, kBalanced);  // TSP's allgather schedule reads the same
  allgather.tsp_schedule = parallel::TspSchedule::Allgather;  // positions
  add("tsp3_allgather", six(), allgather);
#endif
  return v;
}

INSTANTIATE_TEST_SUITE_P(Balanced, ParityPacked, ::testing::ValuesIn(balanced_cases()),
                         case_name);

class ParitySteps : public Parity {};

TEST_P(ParitySteps, FiveAdamWStepsMatchOneDevice) {
  const Case& c = GetParam();
  const Data d = make_data(c, c.steps + 1);
  expect_equal(c, run_threads(c, d), run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Matrix, ParitySteps, ::testing::ValuesIn(step_cases()), case_name);

}  // namespace
}  // namespace origami::parity
