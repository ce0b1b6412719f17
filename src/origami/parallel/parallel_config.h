// How a run is parallelised: a point of the mesh space dp x tp x sp x tsp, with Megatron's
// sequence-parallel regions on the tensor axis and the token layout of the axis that splits
// the tokens. The registered strategies (registry.h) are the named regions of that space:
//   single  every degree 1               dp    dp=N
//   tp      tp=N (with sp: TP+SP)        tpsp  tp=N with sequence-parallel regions
//   sp/cp   sp=N                         tsp   tsp=N: 1/N of every weight and of the tokens
// each optionally times dp, and all of them optionally cut into pp pipeline stages (the
// outermost axis: contiguous groups of layers, pipeline_stages.h). The planner predicts the same struct (plan::Mesh is this type).
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "origami/comm/mesh.h"
#include "origami/parallel/layout.h"

namespace origami::parallel {

// How TSP moves its weights (docs/tsp.md): broadcast-ring, attention shards broadcast one head
// group at a time and MLP shards circulated in a ring (parallel/tsp_ops.h); allgather, each
// block's whole weight all-gathered before its GEMMs and its gradient reduce-scattered
// (Megatron-Core's GTP: parallel/strategies/tsp_allgather/schedule.h).
enum class TspSchedule { BroadcastRing, Allgather };
// "broadcast-ring" / "allgather"; ConfigError naming --tsp-schedule and the words otherwise.
TspSchedule parse_tsp_schedule(const std::string& word);
const char* tsp_schedule_name(TspSchedule s);

// Where TSP runs a mixture of experts (docs/moe.md): ring, every expert sharded 1/D and the
// shards of all experts circulated on the MLP's ring, tokens staying on their rank
// (tsp_moe.cpp); expert, rank r owning experts [r·E/D, (r+1)·E/D) whole and the tokens'
// rows sent to their experts' owners and back by all-to-all (tsp_moe_expert.cpp).
enum class MoeSchedule { Ring, Expert };
// "ring" / "expert"; ConfigError naming --moe-schedule and the words otherwise.
MoeSchedule parse_moe_schedule(const std::string& word);
const char* moe_schedule_name(MoeSchedule s);

struct ParallelConfig {
  int pp = 1;   // pipeline stages, each a contiguous group of layers (the outermost axis)
  // --pp-virtual: model chunks per pp rank (interleaved 1F1B when > 1; pipeline_stages.h
  // states the layer -> (rank, chunk) mapping, pipeline_schedule.h the order).
  int pp_virtual = 1;
  int dp = 1;   // replicas, each on other sequences
  int tp = 1;   // weight shards, same tokens (Megatron TP)
  int sp = 1;   // token shards, same weights (context parallel); TP+SP with tp
  int tsp = 1;  // TSP: weight and token shards on one axis (never beside tp or sp)
  bool sequence_parallel = false;  // TP-SP: norms and residuals on token shards of the tp axis
  TokenLayoutKind layout = TokenLayoutKind::Zigzag;
  TspSchedule tsp_schedule = TspSchedule::BroadcastRing;  // TSP plans only (validate_plan)
  MoeSchedule moe_schedule = MoeSchedule::Ring;  // TSP plans of a mixture of experts only
  // --pp-layers: layers per chunk (per stage when pp_virtual is 1), first to last; empty: the
  // balanced default (pipeline_stages.h states the rule and checks a given split).
  std::vector<std::int64_t> pp_layers = {};

  int world() const { return pp * dp * tp * sp * tsp; }
  bool is_tsp() const { return tsp > 1; }
  int token_degree() const { return sp * tsp; }   // ranks that split each sequence
  int weight_degree() const { return tp * tsp; }  // ranks that split each weight matrix
  // The layout the token axis uses (Full when nothing splits the tokens).
  TokenLayoutKind token_layout() const {
    return token_degree() > 1 ? layout : TokenLayoutKind::Full;
  }
  // The mesh spec the groups are built from, naming the axes of the plan's family:
  // "dp=P,sp=S,tp=T" for the baselines, "dp=P,tsp=D,tp=1" for TSP (tp varies fastest), with
  // "pp=N," in front when there are pipeline stages (pp outermost: a stage is a block of
  // consecutive world ranks).
  std::string mesh_spec() const;
  // e.g. "dp=1 tp=2 (sequence-parallel regions) sp=2 zigzag", "pp=2 (layers 3,5) dp=1 tsp=2 ...",
  // "pp=2 (virtual 2, layers 1,2,2,1) dp=1 tsp=2 ..."
  std::string describe() const;
};

// This rank's communicators on each axis (collective to build: every rank of the world).
class ParallelGroups {
 public:
  ParallelGroups(comm::Communicator world, const ParallelConfig& plan);
  const ParallelConfig& plan() const { return plan_; }
  comm::Communicator& world() { return mesh_.world(); }
  // The ranks of the other stages at this rank's (dp, tp, sp, tsp) coordinates: a stage
  // boundary sends to the next stage's rank of this group (plans with pp > 1 only; without
  // stages the mesh has no pp axis, so that its groups and their traffic stay as they were).
  comm::Communicator& pp();
  comm::Communicator& dp() { return mesh_.axis("dp"); }    // different sequences
  comm::Communicator& tp() { return mesh_.axis("tp"); }    // weight shards, same tokens
  comm::Communicator& sp();   // token shards, same weights (the baselines' plans only)
  comm::Communicator& tsp();  // weight and token shards (TSP plans only)
  // The axis whose ranks hold different tokens of each sequence: tsp under TSP, else sp.
  comm::Communicator& tokens() { return mesh_.axis(plan_.is_tsp() ? "tsp" : "sp"); }
  // A mesh axis by name, or "tp-kv" / "tsp-kv": the kv-replica groups below.
  comm::Communicator& axis(const std::string& name);
  // With more weight-axis ranks than kv heads, the groups of `replicas` consecutive ranks of
  // the weight axis (tp, or tsp) that hold the same kv head: their k/v gradients are summed
  // over it. Collective over the weight axis; the strategies build it (once) before use.
  void split_kv_replicas(int replicas);

 private:
  ParallelConfig plan_;
  comm::DeviceMesh mesh_;
  std::string kv_name_;  // "<weight axis>-kv" once split
  std::unique_ptr<comm::Communicator> kv_replicas_;
};

}  // namespace origami::parallel
