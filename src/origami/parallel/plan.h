// How a run is parallelised: the degrees of the data (dp), tensor (tp) and sequence (sp, also
// called cp) axes, Megatron's sequence-parallel regions on the tensor axis, and the token
// layout on the sequence axis. Every baseline strategy is a point of this space:
//   single  dp=1 tp=1 sp=1          dp    dp=N
//   tp      tp=N                    tpsp  tp=N with sequence-parallel regions
//   sp/cp   sp=N                    tp+sp a T x Σ mesh (tp=T,sp=Σ), optionally with dp=P
// and the groups built from it (ParallelGroups) name every reduction explicitly.
#pragma once

#include <string>

#include "origami/comm/mesh.h"
#include "origami/model/config.h"
#include "origami/parallel/layout.h"
#include "origami/parallel/shard_spec.h"

namespace origami::parallel {

struct ParallelConfig {
  int dp = 1, tp = 1, sp = 1;
  bool sequence_parallel = false;  // TP-SP: norms and residuals on sequence shards of the tp axis
  TokenLayoutKind layout = TokenLayoutKind::Zigzag;
  // TSP (tsp_ops.h): one axis of sp ranks holding 1/sp of every weight and of the tokens.
  // (Last, so the baselines' positional initialisers keep their meaning.)
  bool tsp = false;

  int world() const { return dp * tp * sp; }
  // The mesh spec the groups are built from: "dp=P,sp=S,tp=T" (tp varies fastest).
  std::string mesh_spec() const;
  std::string describe() const;  // e.g. "tp=2 (sequence-parallel regions) x sp=2 zigzag"
};

// The strategy a --mesh given without --strategy means: tsp when it names a tsp axis, else
// tp when it names tp, sp when it names sp (or cp), else dp.
std::string strategy_of_mesh(const std::string& mesh);

// From the CLI's words: strategy in {single, dp, tp, tpsp, sp, cp}, with either a degree or a
// mesh ("dp=2,tp=2", axes dp, tp, sp or cp). ConfigError for unknown names, a degree or mesh
// that contradicts the strategy, or a mesh axis the strategy does not use.
ParallelConfig make_parallel_config(const std::string& strategy, int degree,
                                    const std::string& mesh, bool tp_sequence_parallel,
                                    TokenLayoutKind layout);

// Refuses up front (ConfigError naming the constraint and a value that works) a plan that
// cannot run: world size mismatch, tp not dividing heads / kv heads / MLP width, the sequence
// not splitting over sp in the layout, micro-batch rows not splitting over tp under TP-SP,
// global batch not divisible by dp.
void validate_plan(const ParallelConfig& plan, const ModelConfig& model, std::int64_t seq,
                   std::int64_t global_batch, int world_size);

// States every tensor's reduction groups for this plan (only axes of size > 1 are named):
//   gradient sum   sp, dp for every tensor (replicas of a block saw other tokens); and tp for
//                  the RMSNorm weights under TP-SP (each tp rank normed different rows; under
//                  plain TP every tp rank saw every row, so their gradients are already equal)
//   gradient norm  tp for the tensors sharded over tp; nothing for replicated ones (counted once)
void assign_reduction_axes(const ParallelConfig& plan, std::vector<ShardSpec>& specs);

// This rank's communicators on each axis (collective to build: every rank of the world).
class ParallelGroups {
 public:
  ParallelGroups(comm::Communicator world, const ParallelConfig& plan);
  const ParallelConfig& plan() const { return plan_; }
  comm::Communicator& world() { return mesh_.world(); }
  comm::Communicator& dp() { return mesh_.axis("dp"); }  // different sequences
  comm::Communicator& tp() { return mesh_.axis("tp"); }  // weight shards, same tokens
  comm::Communicator& sp() { return axis("sp"); }  // token shards, same weights
  // An axis by name; under TSP "sp" is the mesh's tsp axis.
  comm::Communicator& axis(const std::string& name);

 private:
  ParallelConfig plan_;
  comm::DeviceMesh mesh_;
};

}  // namespace origami::parallel
