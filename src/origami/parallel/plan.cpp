#include "origami/parallel/plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace origami::parallel {

std::string ParallelConfig::mesh_spec() const {
  // TSP's token-and-weight axis is the sp axis of the code; named tsp so that a stall report
  // names the axis the user chose.
  return fmt::format("dp={},{}={},tp={}", dp, tsp ? "tsp" : "sp", sp, tp);
}

std::string ParallelConfig::describe() const {
  if (tsp)
    return fmt::format("dp={} tsp={}{}", dp, sp,
                       sp > 1 ? fmt::format(" {}", token_layout_name(layout)) : std::string());
  return fmt::format("dp={} tp={}{} sp={}{}", dp, tp,
                     sequence_parallel ? " (sequence-parallel regions)" : "", sp,
                     sp > 1 ? fmt::format(" {}", token_layout_name(layout)) : std::string());
}

std::string strategy_of_mesh(const std::string& mesh) {
  bool tp = false, sp = false;
  for (const comm::MeshAxis& a : comm::parse_mesh(mesh)) {
    if (a.name == "tsp") return "tsp";
    tp = tp || a.name == "tp";
    sp = sp || a.name == "sp" || a.name == "cp";
  }
  return tp ? "tp" : sp ? "sp" : "dp";
}

ParallelConfig make_parallel_config(const std::string& strategy, int degree,
                                    const std::string& mesh, bool tp_seqpar,
                                    TokenLayoutKind layout) {
  static const std::vector<std::string> known = {"single", "dp", "tp", "tpsp", "sp", "cp", "tsp"};
  if (std::find(known.begin(), known.end(), strategy) == known.end())
    throw ConfigError(
        fmt::format("unknown strategy '{}'; use one of single, dp, tp, tpsp, sp, "
                    "cp, tsp",
                    strategy));
  if (degree < 1) throw ConfigError(fmt::format("--degree must be >= 1 (got {})", degree));
  ParallelConfig p;
  p.layout = layout;
  p.tsp = strategy == "tsp";
  p.sequence_parallel = tp_seqpar || strategy == "tpsp";
  if (!mesh.empty()) {
    if (degree != 1)
      throw ConfigError("give either --degree or --mesh, not both (the mesh sets every degree)");
    for (const comm::MeshAxis& a : comm::parse_mesh(mesh)) {
      if (a.name == "dp")
        p.dp = a.size;
      else if (a.name == "tp")
        p.tp = a.size;
      else if (a.name == "tsp" && p.tsp)  // TSP's one axis is the plan's sequence axis
        p.sp = a.size;
      else if (a.name == "sp" || a.name == "cp") {
        if (p.sp != 1) throw ConfigError("the mesh names the sequence axis twice (sp and cp)");
        p.sp = a.size;
      } else if (a.name == "tsp") {
        throw ConfigError(fmt::format("mesh axis 'tsp' belongs to --strategy tsp, not {}; use "
                                      "--strategy tsp or drop --strategy",
                                      strategy));
      } else {
        throw ConfigError(
            fmt::format("mesh axis '{}' is not one of dp, tp, sp (cp) for the "
                        "baseline strategies",
                        a.name));
      }
    }
    auto refuse = [&](const char* axis) {
      throw ConfigError(
          fmt::format("strategy {} does not use a {} axis; drop it from --mesh or "
                      "choose another strategy",
                      strategy, axis));
    };
    if (strategy == "single" && p.world() != 1) refuse("parallel");
    if (strategy == "dp" && (p.tp > 1 || p.sp > 1)) refuse(p.tp > 1 ? "tp" : "sp");
    if ((strategy == "sp" || strategy == "cp") && p.tp > 1) refuse("tp");
    if (p.tsp && p.tp > 1) refuse("tp");
  } else {
    if (strategy == "single" && degree != 1)
      throw ConfigError(
          "strategy single runs on one rank: drop --degree or pick dp, tp, tpsp or sp");
    if (strategy == "dp") p.dp = degree;
    if (strategy == "tp" || strategy == "tpsp") p.tp = degree;
    if (strategy == "sp" || strategy == "cp" || strategy == "tsp") p.sp = degree;
  }
  // Without a tensor axis the regions are the whole stream already: nothing to split.
  if (p.tp == 1) p.sequence_parallel = false;
  return p;
}

void validate_plan(const ParallelConfig& p, const ModelConfig& model, std::int64_t seq,
                   std::int64_t global_batch, int world_size) {
  validate(model);
  if (p.world() != world_size)
    throw ConfigError(
        fmt::format("the mesh {} needs {} ranks but the world has {}; make the "
                    "degrees multiply to {}",
                    p.mesh_spec(), p.world(), world_size, world_size));
  if (p.world() > 1) require_derived_head_dim(model, "the parallel mesh " + p.mesh_spec());
  check_tensor_split(model, p.tp, "tensor-parallel (tp)");
  if (p.tsp) check_tensor_split(model, p.sp, "TSP (tsp)");
  check_token_split(p.sp > 1 ? p.layout : TokenLayoutKind::Full, seq, p.sp);
  if (global_batch % p.dp != 0)
    throw ConfigError(
        fmt::format("the batch of {} sequences does not split over dp={}; use a "
                    "batch that is a multiple of {} or dp={}",
                    global_batch, p.dp, p.dp, largest_divisor_at_most(global_batch, p.dp)));
  if (p.sequence_parallel && p.tp > 1) {
    const std::int64_t rows = global_batch / p.dp * seq / p.sp;
    if (rows % p.tp != 0)
      throw ConfigError(fmt::format(
          "sequence-parallel regions split each rank's {} token rows (batch x sequence / sp) "
          "over tp={}: make batch x sequence a multiple of {}",
          rows, p.tp, std::int64_t{p.tp} * p.sp * p.dp));
  }
}

void assign_reduction_axes(const ParallelConfig& p, std::vector<ShardSpec>& specs) {
  for (ShardSpec& s : specs) {
    s.grad_sum_axes.clear();
    s.norm_sum_axes.clear();
    if (p.sp > 1) s.grad_sum_axes.push_back("sp");
    if (p.dp > 1) s.grad_sum_axes.push_back("dp");
    if (s.is_norm && p.sequence_parallel && p.tp > 1) s.grad_sum_axes.push_back("tp");
    if (s.shard_dim >= 0 && s.parts > 1) s.norm_sum_axes.push_back("tp");
  }
}

ParallelGroups::ParallelGroups(comm::Communicator world, const ParallelConfig& plan)
    : plan_(plan), mesh_(std::move(world), plan.mesh_spec()) {}

comm::Communicator& ParallelGroups::axis(const std::string& name) {
  return mesh_.axis(plan_.tsp && name == "sp" ? "tsp" : name);
}

}  // namespace origami::parallel
