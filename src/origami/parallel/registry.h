// The registry of parallel strategies: every strategy a user can name, the mesh axes it uses,
// the rules that refuse a layout it cannot run (with the message that says what to change),
// the reduction axes of every tensor, and the factory of its blocks. The CLI's --strategy help
// and words, the planner's layout enumeration and the engine's choice of blocks all come from
// here, so a new strategy is one entry (and its blocks).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/shard_spec.h"
#include "origami/parallel/strategy_ops.h"

namespace origami::parallel {

struct StrategyInfo {
  std::string name = {};                 // the --strategy word
  std::vector<std::string> aliases = {};  // other words for it (cp for sp)
  std::string summary = {};              // one line for --help
  std::vector<std::string> axes = {};    // the mesh axes it may use (dp is always allowed)
  std::string degree_axis = {};          // the axis --degree sets ("" for single)
  bool regions = false;                  // TP with sequence-parallel regions
  // The schedules it runs the same layout with (--tsp-schedule; tsp only), the default first.
  std::vector<TspSchedule> schedules = {};
  // The meshes of `ranks` devices (dp aside) this strategy offers the planner; every mesh of
  // the space belongs to exactly one strategy.
  std::function<std::vector<ParallelConfig>(int ranks)> meshes = {};
};

// Every strategy, in the order --help lists them (tsp first: the default).
const std::vector<StrategyInfo>& registered_strategies();

// The entry named `word` (a name or an alias); ConfigError listing the names otherwise.
const StrategyInfo& find_strategy(const std::string& word);

// "tsp: ..., single: ..." for --strategy's help.
std::string strategy_help();

// The strategy a --mesh given without --strategy means: the one whose degree axis the mesh
// names (tsp, then tp, then sp or cp), else dp.
std::string strategy_of_mesh(const std::string& mesh);

// The family name of a point of the mesh space, as tables print it (dp x ... aside): single,
// dp, tp, tp-sp (regions), sp, tp+sp, tp-sp+sp, tsp, tsp-allgather (TSP's allgather schedule).
std::string family_name(const ParallelConfig& p);

// From the CLI's words: a registered strategy with either a degree or a mesh ("dp=2,tp=2",
// axes dp, tp, sp or cp, tsp). ConfigError for unknown names, a degree or mesh that
// contradicts the strategy, or a mesh axis the strategy does not use.
ParallelConfig make_parallel_config(const std::string& strategy, int degree,
                                    const std::string& mesh, bool tp_sequence_parallel,
                                    TokenLayoutKind layout);

// Every layout of `world` devices: for each dp dividing world, every registered strategy's
// meshes of the remaining ranks.
std::vector<ParallelConfig> enumerate_meshes(int world);

// Refuses up front (ConfigError naming the constraint and a value that works) a plan that
// cannot run: world size mismatch, tsp beside tp or sp, a weight-sharding degree (tp or tsp)
// not dividing heads / MLP width or neither dividing nor a multiple of the kv heads, the
// sequence not splitting over the token axis in the layout, micro-batch rows not splitting
// over tp under TP-SP. `micro_batch` is each data-parallel replica's (global batch =
// micro-batch x dp x grad-accum), so dp divides nothing.
void validate_plan(const ParallelConfig& plan, const ModelConfig& model, std::int64_t seq,
                   std::int64_t micro_batch, int world_size);

// States every tensor's reduction groups for this plan (only axes of size > 1 are named); the
// token axis is sp or tsp, the weight axis tp or tsp:
//   gradient sum   the token axis (its ranks saw other tokens) — except for a tensor sharded
//                  on that same axis (TSP's weights: the blocks' reductions leave each shard's
//                  gradient complete on its owner; and the experts of TSP's expert schedule,
//                  each whole on one rank of the axis, ShardSpec::owner, which computes every
//                  token's part of its gradient); dp for every tensor; and tp for the RMSNorm
//                  weights under TP-SP (each tp rank normed different rows; under plain TP
//                  every tp rank saw every row, so their gradients are already equal)
//                  and, for k/v blocks replicated over several ranks of the weight axis
//                  (more ranks than kv heads), that axis' kv-replica group "<axis>-kv"
//                  (each replica's gradient covers its own query heads only)
//   gradient norm  the weight axis for the sharded (and owned) tensors; nothing for replicated ones
//                  (counted once); a replicated kv block counts once (ShardSpec::norm_counted)
void assign_reduction_axes(const ParallelConfig& plan, std::vector<ShardSpec>& specs);

// The rank's shard specs and block factory for its plan (TSP's blocks or the mesh's).
Strategy make_strategy(const ModelConfig& config, ParallelGroups& groups);

}  // namespace origami::parallel
