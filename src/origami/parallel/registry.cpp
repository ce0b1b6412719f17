#include "origami/parallel/registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/strategies/mesh/mesh_ops.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/parallel/strategies/tsp_allgather/allgather_ops.h"

namespace origami::parallel {

namespace {

// The meshes of `ranks` devices with tp > 1 (plain or with regions): TP, and TP+SP with the
// rest of the ranks on sp.
std::vector<ParallelConfig> tensor_meshes(int ranks, bool regions) {
  std::vector<ParallelConfig> out;
  for (int tp = 2; tp <= ranks; ++tp)
    if (ranks % tp == 0) out.push_back({.tp = tp, .sp = ranks / tp, .sequence_parallel = regions});
  return out;
}

std::vector<StrategyInfo> make_registry() {
  std::vector<StrategyInfo> r;
  r.push_back({.name = "tsp",
               .summary = "TSP, the default: 1/D of every weight and of the tokens per rank",
               .axes = {"tsp"},
               .degree_axis = "tsp",
               .schedules = {TspSchedule::BroadcastRing, TspSchedule::Allgather},
               .meshes = [](int n) {
                 return n > 1 ? std::vector<ParallelConfig>{{.tsp = n}}
                              : std::vector<ParallelConfig>{};
               }});
  // The degree-1 mesh; as a planner row it is dp's (dp = 1).
  r.push_back({.name = "single", .summary = "one rank", .meshes = [](int) {
                 return std::vector<ParallelConfig>{};
               }});
  r.push_back({.name = "dp",
               .summary = "data parallel: replicas on other sequences",
               .degree_axis = "dp",
               .meshes = [](int n) {
                 return n == 1 ? std::vector<ParallelConfig>{{}} : std::vector<ParallelConfig>{};
               }});
  r.push_back({.name = "tp",
               .summary = "Megatron tensor parallel (with an sp axis in --mesh: TP+SP)",
               .axes = {"tp", "sp"},
               .degree_axis = "tp",
               .meshes = [](int n) { return tensor_meshes(n, false); }});
  r.push_back({.name = "tpsp",
               .summary = "TP with Megatron's sequence-parallel regions",
               .axes = {"tp", "sp"},
               .degree_axis = "tp",
               .regions = true,
               .meshes = [](int n) { return tensor_meshes(n, true); }});
  r.push_back({.name = "sp",
               .aliases = {"cp"},
               .summary = "context parallel: token shards, K/V all-gathered",
               .axes = {"sp"},
               .degree_axis = "sp",
               .meshes = [](int n) {
                 return n > 1 ? std::vector<ParallelConfig>{{.sp = n}}
                              : std::vector<ParallelConfig>{};
               }});
  return r;
}

// dp and pp (pipeline stages, outermost) compose with every strategy.
bool uses(const StrategyInfo& s, const std::string& axis) {
  return axis == "dp" || axis == "pp" || std::find(s.axes.begin(), s.axes.end(), axis) != s.axes.end();
}

std::string names() {
  std::string out;
  for (const StrategyInfo& s : registered_strategies()) {
    out += (out.empty() ? "" : ", ") + s.name;
    for (const std::string& a : s.aliases) out += fmt::format(" ({})", a);
  }
  return out;
}

int& degree_of(ParallelConfig& p, const std::string& axis) {
  if (axis == "pp") return p.pp;
  if (axis == "dp") return p.dp;
  if (axis == "tp") return p.tp;
  if (axis == "sp") return p.sp;
  if (axis == "tsp") return p.tsp;
  throw ConfigError(
      fmt::format("mesh axis '{}' is not one of pp, dp, tp, sp (cp), tsp", axis));
}

}  // namespace

const std::vector<StrategyInfo>& registered_strategies() {
  static const std::vector<StrategyInfo> registry = make_registry();
  return registry;
}

const StrategyInfo& find_strategy(const std::string& word) {
  for (const StrategyInfo& s : registered_strategies())
    if (s.name == word || std::find(s.aliases.begin(), s.aliases.end(), word) != s.aliases.end())
      return s;
  throw ConfigError(fmt::format("unknown strategy '{}'; use one of {}", word, names()));
}

std::string strategy_help() {
  std::string out;
  for (const StrategyInfo& s : registered_strategies()) {
    out += fmt::format("{}{}", out.empty() ? "" : "; ", s.name);
    for (const std::string& a : s.aliases) out += fmt::format(" (or {})", a);
    out += ": " + s.summary;
  }
  return out;
}

std::string strategy_of_mesh(const std::string& mesh) {
  const std::vector<comm::MeshAxis> axes = comm::parse_mesh(mesh);
  for (const char* axis : {"tsp", "tp", "sp"})
    for (const comm::MeshAxis& a : axes)
      if (a.name == axis || (std::string(axis) == "sp" && a.name == "cp"))
        for (const StrategyInfo& s : registered_strategies())
          if (s.degree_axis == axis && !s.regions) return s.name;
  return "dp";
}

std::string family_name(const ParallelConfig& p) {
  if (p.is_tsp()) return p.tsp_schedule == TspSchedule::Allgather ? "tsp-allgather" : "tsp";
  const std::string tp = p.sequence_parallel ? "tp-sp" : "tp";
  if (p.tp > 1 && p.sp > 1) return tp + "+sp";
  if (p.tp > 1) return tp;
  if (p.sp > 1) return "sp";
  return p.dp > 1 ? "dp" : "single";
}

ParallelConfig make_parallel_config(const std::string& strategy, int degree,
                                    const std::string& mesh, bool tp_seqpar,
                                    TokenLayoutKind layout) {
  const StrategyInfo& s = find_strategy(strategy);
  if (degree < 1) throw ConfigError(fmt::format("--degree must be >= 1 (got {})", degree));
  ParallelConfig p;
  p.layout = layout;
  p.sequence_parallel = tp_seqpar || s.regions;
  if (!mesh.empty()) {
    if (degree != 1)
      throw ConfigError("give either --degree or --mesh, not both (the mesh sets every degree)");
    bool named_sequence = false;
    for (const comm::MeshAxis& a : comm::parse_mesh(mesh)) {
      const std::string axis = a.name == "cp" ? "sp" : a.name;
      int& d = degree_of(p, axis);
      if (axis == "sp") {
        if (named_sequence) throw ConfigError("the mesh names the sequence axis twice (sp and cp)");
        named_sequence = true;
      }
      d = a.size;
      if (a.size > 1 && !uses(s, axis)) {
        if (s.name == "single")
          throw ConfigError(fmt::format("strategy single does not use a parallel axis; drop "
                                        "{} from --mesh or choose another strategy",
                                        a.name));
        if (axis == "tsp")
          throw ConfigError(fmt::format("mesh axis 'tsp' belongs to --strategy tsp, not {}; use "
                                        "--strategy tsp or drop --strategy",
                                        s.name));
        throw ConfigError(fmt::format("strategy {} does not use a {} axis; drop it from --mesh "
                                      "or choose another strategy",
                                      s.name, a.name));
      }
    }
    if (s.name == "single" && p.world() != 1)
      throw ConfigError("strategy single does not use a parallel axis; drop --mesh or choose "
                        "another strategy");
  } else if (s.degree_axis.empty()) {
    if (degree != 1)
      throw ConfigError(fmt::format("strategy {} runs on one rank: drop --degree or pick one of {}",
                                    s.name, names()));
  } else {
    degree_of(p, s.degree_axis) = degree;
  }
  // Without a tensor axis the regions are the whole stream already: nothing to split.
  if (p.tp == 1) p.sequence_parallel = false;
  return p;
}

std::vector<ParallelConfig> enumerate_meshes(int world) {
  std::vector<ParallelConfig> out;
  for (int dp = 1; dp <= world; ++dp) {
    if (world % dp != 0) continue;
    for (const StrategyInfo& s : registered_strategies())
      for (ParallelConfig p : s.meshes(world / dp)) {
        p.dp = dp;
        out.push_back(p);
      }
  }
  return out;
}

void validate_plan(const ParallelConfig& p, const ModelConfig& model, std::int64_t seq,
                   std::int64_t micro_batch, int world_size) {
  validate(model);
  if (p.moe_schedule != MoeSchedule::Ring) {  // the expert schedule: TSP's experts only
    if (!model.is_moe())
      throw ConfigError(fmt::format("--moe-schedule {} places the experts of a mixture of "
                                    "experts, but the model is dense (num_local_experts 0); "
                                    "drop --moe-schedule",
                                    moe_schedule_name(p.moe_schedule)));
    if (!p.is_tsp() || p.tsp_schedule != TspSchedule::BroadcastRing)
      throw ConfigError(fmt::format("--moe-schedule {} is a schedule of --strategy tsp (its "
                                    "broadcast-ring schedule), but the layout is {}; use "
                                    "--strategy tsp with --degree 2 or more, or drop "
                                    "--moe-schedule",
                                    moe_schedule_name(p.moe_schedule), p.describe()));
    if (model.num_local_experts % p.tsp != 0)
      throw ConfigError(fmt::format(
          "--moe-schedule expert gives each of the tsp={} ranks num_local_experts / tsp whole "
          "experts, but {} experts do not split {} ways; use a degree dividing {}, or "
          "--moe-schedule ring (every expert sharded, any number of experts)",
          p.tsp, model.num_local_experts, p.tsp, model.num_local_experts));
  }
  // Experts: TSP's weight ring (tsp_moe.cpp) or expert schedule, and the mesh's blocks
  // (mesh_moe.cpp), each with pipeline stages too (every stage its own layers' balance).
  if (model.is_moe()) {
    if (p.is_tsp() && p.tsp_schedule != TspSchedule::BroadcastRing)
      refuse_mixture_of_experts(model,
                                fmt::format("the layout {} (--tsp-schedule {})", p.mesh_spec(),
                                            tsp_schedule_name(p.tsp_schedule)));
    // A capacity's priority order spans the job's micro-batch: only a layout whose every rank
    // routes all of it (no token axis, no dp; tp ranks route the same rows) keeps that order.
    if (model.moe_capacity_factor > 0 && (p.is_tsp() || p.token_degree() > 1 || p.dp > 1))
      throw ConfigError(fmt::format(
          "--moe-capacity-factor {} under {}: the capacity's priority order spans the job's "
          "whole micro-batch, which the layouts that split it (tsp, sp, dp) do not coordinate "
          "yet; drop the flag (dropless), or use --strategy single, tp or tpsp",
          model.moe_capacity_factor, p.mesh_spec()));
  }
  for (const int d : {p.pp, p.dp, p.tp, p.sp, p.tsp})
    if (d < 1) throw ConfigError(fmt::format("every mesh degree must be >= 1 ({})", p.mesh_spec()));
  if (micro_batch < 1)
    throw ConfigError(fmt::format("the micro-batch must hold at least one sequence per "
                                  "data-parallel replica (got {}); use --batch 1 or more",
                                  micro_batch));
  if (p.world() != world_size)
    throw ConfigError(
        fmt::format("the mesh {} needs {} ranks but the world has {}; make the "
                    "degrees multiply to {}",
                    p.mesh_spec(), p.world(), world_size, world_size));
  if (p.is_tsp() && (p.tp > 1 || p.sp > 1))
    throw ConfigError(fmt::format("tsp={} beside tp={} or sp={}: TSP is the one axis that shards "
                                  "both weights and tokens; use tsp with dp only",
                                  p.tsp, p.tp, p.sp));
  if (p.tsp_schedule != TspSchedule::BroadcastRing && !p.is_tsp())
    throw ConfigError(fmt::format("--tsp-schedule {} is a schedule of TSP, but the mesh {} has no "
                                  "tsp axis; use --strategy tsp with --degree 2 or more, or drop "
                                  "--tsp-schedule",
                                  tsp_schedule_name(p.tsp_schedule), p.mesh_spec()));
  check_pipeline_model(p, model);
  check_tensor_split(model, p.tp, "tensor-parallel (tp)");
  if (p.is_tsp()) check_tensor_split(model, p.tsp, "TSP (tsp)");
  check_token_split(p.token_layout(), seq, p.token_degree());
  if (p.sequence_parallel && p.tp > 1) {
    const std::int64_t rows = micro_batch * seq / p.sp;
    if (rows % p.tp != 0)
      throw ConfigError(fmt::format(
          "sequence-parallel regions split each rank's {} token rows (micro-batch x sequence / "
          "sp) over tp={}: make micro-batch x sequence a multiple of {}",
          rows, p.tp, std::int64_t{p.tp} * p.sp));
  }
}

void assign_reduction_axes(const ParallelConfig& p, std::vector<ShardSpec>& specs) {
  const std::string token_axis = p.is_tsp() ? "tsp" : "sp";
  const std::string weight_axis = p.is_tsp() ? "tsp" : "tp";
  for (ShardSpec& s : specs) {
    // A tensor held whole by one rank of the weight axis (TSP's expert schedule) is split on
    // that axis as a sharded one is: its gradient is complete on its owner, its squares
    // counted there.
    const bool sharded = (s.shard_dim >= 0 && s.parts > 1) || s.owner >= 0;
    s.shard_axis = weight_axis;
    s.grad_sum_axes.clear();
    s.norm_sum_axes.clear();
    if (p.token_degree() > 1 && !(sharded && token_axis == weight_axis))
      s.grad_sum_axes.push_back(token_axis);
    if (p.dp > 1) s.grad_sum_axes.push_back("dp");
    if (s.is_norm && p.sequence_parallel && p.tp > 1) s.grad_sum_axes.push_back("tp");
    // Replicated kv blocks: each replica's gradient covers its own query heads only.
    if (s.replicas > 1) s.grad_sum_axes.push_back(weight_axis + "-kv");
    if (sharded) s.norm_sum_axes.push_back(weight_axis);
  }
}

Strategy make_strategy(const ModelConfig& config, ParallelGroups& groups) {
  validate(config);
  if (!groups.plan().is_tsp()) return mesh_strategy(config, groups);
  if (groups.plan().tsp_schedule == TspSchedule::Allgather) {  // no expert blocks
    refuse_mixture_of_experts(config, fmt::format("the layout {} (--tsp-schedule allgather)",
                                                  groups.plan().mesh_spec()));
    return tsp_allgather_strategy(config, groups);
  }
  return tsp_strategy(config, groups);
}

}  // namespace origami::parallel
