#include "origami/cli/plan_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace origami::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(std::int64_t bytes) { return fmt::format("{:.2f}", double(bytes) / kGiB); }

std::string strategy_label(const plan::Layout& l) {
  const std::string s = parallel::family_name(l);
  if (l.pp > 1) return s == "single" ? "pp" : "pp x " + (l.dp > 1 && s != "dp" ? "dp x " + s : s);
  return l.dp > 1 && s != "dp" ? "dp x " + s : s;
}

nlohmann::json mesh_json(const plan::Layout& l) {
  return {{"pp", l.pp}, {"dp", l.dp}, {"tp", l.tp}, {"sp", l.sp}, {"tsp", l.tsp}};
}

// The stage whose figures a pipeline row shows (the busiest, Prediction::stages).
std::size_t busiest_stage(const plan::Prediction& p) {
  std::size_t at = 0;
  for (std::size_t i = 1; i < p.stages.size(); ++i)
    if (p.stages[i].busy_s > p.stages[at].busy_s) at = i;
  return at;
}

nlohmann::json row_json(const plan::PlanRow& r, std::int64_t layers) {
  const plan::Layout& l = r.layout;
  nlohmann::json j{{"strategy", plan::json_strategy(l)},
                   {"sequence_parallel", l.sequence_parallel && l.tp > 1},
                   {"mesh", mesh_json(l)},
                   {"feasible", r.error.empty()}};
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  const plan::Prediction& p = r.prediction;
  const plan::Memory& m = p.memory;
  j["bytes"] = {{"parameters", m.parameters},
                {"gradients", m.gradients},
                {"optimizer_state", m.optimizer},
                {"saved_activations", m.activations},
                {"communication_buffers", m.comm_buffers},
                {"workspace", m.workspace},
                {"logits", m.logits},
                {"runtime_overhead", m.overhead},
                {"total", m.total()}};
  j["micro_batch"] = p.micro_batch;
  j["fits"] = p.fits;
  j["recommended"] = r.recommended;
  j["comm_bytes_sent_per_step"] = p.comm_bytes_per_step;
  j["comm_bytes_intra_node"] = p.intra_bytes;
  j["comm_bytes_inter_node"] = p.inter_bytes;
  nlohmann::json ops = nlohmann::json::array();
  for (const plan::CommCost& c : p.comm)
    ops.push_back({{"axis", c.op.axis},
                   {"op", c.op.op},
                   {"calls", c.op.calls},
                   {"bytes_sent", c.op.bytes_sent},
                   {"forward_calls", c.op.forward_calls},
                   {"forward_bytes", c.op.forward_bytes},
                   {"backward_bytes", c.gradient_reduction ? 0 : c.op.bytes_sent - c.op.forward_bytes},
                   {"per_layer_calls", c.op.layer_calls / layers},
                   {"per_layer_bytes", c.op.layer_bytes / layers},
                   {"gradient_reduction", c.gradient_reduction},
                   {"link", plan::link_class_name(c.link)},
                   {"seconds", c.seconds},
                   {"exposed_seconds", c.exposed_s}});
  j["comm"] = std::move(ops);
  j["flops_per_device_per_step"] = p.model_flops_per_device;
  j["executed_flops_per_device_per_step"] = p.executed_flops_per_device;
  j["attention_flops_per_device_per_step"] = p.attention_flops_per_device;
  j["causal_attention_flops_per_device_per_step"] = p.causal_attention_flops_per_device;
  j["attention_imbalance"] = p.attention_imbalance;
  j["attention_imbalance_worst"] = p.attention_imbalance_worst;
  j["compute_s"] = p.compute_s;
  j["comm_s"] = p.comm_s;
  j["exposed_comm_s"] = p.exposed_comm_s;
  j["step_s"] = p.step_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["max_seq"] = r.max_seq;
  // Pipeline stages: the clock's bubble and each stage's share (docs/planner.md, "Pipeline
  // step time"); the row's memory is the worst stage's, its traffic and compute the busiest's.
  j["bubble"] = p.bubble;
  nlohmann::json stages = nlohmann::json::array();
  for (const plan::StagePrediction& st : p.stages) {
    std::int64_t bytes = 0;
    for (const plan::CommCost& c : st.comm) bytes += c.op.bytes_sent;
    stages.push_back({{"layers", st.layers},
                      {"total_bytes", st.memory.total()},
                      {"comm_bytes_sent_per_step", bytes},
                      {"executed_flops_per_device_per_step", st.executed_flops},
                      {"compute_s", st.compute_s},
                      {"forward_s", st.forward_s},
                      {"backward_s", st.backward_s},
                      {"boundary_bytes", st.boundary_bytes},
                      {"boundary_link", plan::link_class_name(st.boundary_link)},
                      {"hop_s", st.hop_s},
                      {"reduction_s", st.reduction_s},
                      {"busy_s", st.busy_s}});
  }
  j["stages"] = std::move(stages);
  if (!p.stages.empty()) j["shown_stage"] = busiest_stage(p);
  return j;
}

// The sample's visible pairs over those of one causal document per row.
double masked_fraction(const plan::DocumentSample& d) {
  const plan::DocumentAttention a =
      plan::document_attention(parallel::TokenLayoutKind::Full, 1, d.rows);
  return a.causal_pairs_per_row > 0 ? a.pairs_per_row / a.causal_pairs_per_row : 0.0;
}

}  // namespace

std::string family_label(const plan::Layout& l) {
  const std::string s = parallel::family_name(l);
  if (l.pp == 1) return s;
  return s == "single" ? "pp" : "pp x " + s;
}

// The first feasible row's communication (the recommendation when one fits): per operation,
// the rank's bytes forward, backward, per layer and per step, its link class, time and the
// part of it exposed.
void print_comm_breakdown(std::ostream& out, const PlanReport& p) {
  const auto it = std::find_if(p.rows.begin(), p.rows.end(),
                               [](const plan::PlanRow& r) { return r.error.empty(); });
  if (it == p.rows.end() || it->prediction.comm.empty()) return;
  const double mib = 1 << 20;
  const std::int64_t L = p.model.num_hidden_layers;
  out << fmt::format("communication per rank of {} ({}dp {} tp {} sp {} tsp {}), MiB:\n",
                     strategy_label(it->layout),
                     it->layout.pp > 1 ? fmt::format("pp {}, stage {} (the busiest), ",
                                                     it->layout.pp, busiest_stage(it->prediction))
                                       : "",
                     it->layout.dp, it->layout.tp, it->layout.sp, it->layout.tsp);
  out << fmt::format("  {:<11} {:<22} {:>5} {:>7} {:>10} {:>10} {:>10} {:>11} {:>9} {:>9}\n",
                     "axis", "op", "link", "calls", "forward", "backward", "per layer",
                     "per step", "seconds", "exposed");
  for (const plan::CommCost& c : it->prediction.comm) {
    const bool step = c.gradient_reduction;
    out << fmt::format(
        "  {:<11} {:<22} {:>5} {:>7} {:>10.2f} {:>10.2f} {:>10.3f} {:>11.2f} {:>9.3g} {:>9.3g}\n",
        c.op.axis, step ? c.op.op + " (step)" : c.op.op, plan::link_class_name(c.link),
        c.op.calls, step ? 0.0 : double(c.op.forward_bytes) / mib,
        step ? 0.0 : double(c.op.bytes_sent - c.op.forward_bytes) / mib,
        double(c.op.layer_bytes) / double(L) / mib, double(c.op.bytes_sent) / mib, c.seconds,
        c.exposed_s);
  }
}

nlohmann::json plan_json(const PlanReport& p) {
  nlohmann::json out{{"model", p.source},
                     {"seq", p.seq},
                     {"micro_batch", p.batch},
                     {"global_batch", p.global_batch > 0 ? nlohmann::json(p.global_batch)
                                                         : nlohmann::json(nullptr)},
                     {"advice", p.advice.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.advice)},
                     {"grad_accum", p.grad_accum},
                     {"world", p.world},
                     {"devices_per_node", p.hw.devices_per_node},
                     {"precision", p.precision.name},
                     {"recompute", p.recompute},
                     {"shard_optimizer", p.shard_optimizer},
                     {"hardware", p.hw.name},
                     {"memory_per_device", p.hw.memory_bytes}};
  nlohmann::json js = nlohmann::json::array();
  for (const plan::PlanRow& r : p.rows) js.push_back(row_json(r, p.model.num_hidden_layers));
  out["rows"] = std::move(js);
  out["documents"] = nullptr;
  if (p.documents != nullptr)
    out["documents"] = {{"source", p.documents->source},
                        {"layout", parallel::token_layout_name(p.documents->layout)},
                        {"sample_rows", p.documents->rows.size()},
                        {"documents_per_row", p.documents->documents_per_row()},
                        {"masked_attention_fraction", masked_fraction(*p.documents)}};
  nlohmann::json ls = nlohmann::json::object();
  for (const auto& [name, best] : p.longest)
    ls[name] = {{"max_seq", best.first}, {"mesh", mesh_json(best.second)}};
  out["longest_sequence"] = std::move(ls);
  nlohmann::json inf = nlohmann::json::array();
  for (const plan::InferenceRow& r : p.inference)
    inf.push_back(
        {{"strategy", "tsp"},
         // Memory and bytes against the engine (tests/infer/plan_check_test.cpp); times against
         // the inference dry run's virtual clock (tests/infer/planner_inference_vs_dry_run_test.cpp), i.e.
         // the schedule's, not a GPU's.
         {"checked", {{"memory", true}, {"kv_gather_bytes", true}, {"decode_bytes", true},
                      {"weight_bytes", false}, {"times", true}, {"times_against", "dry_run"}}},
         {"tsp", r.degree},
         {"bytes", {{"parameters", r.parameters}, {"kv_cache", r.kv_cache},
                    {"communication_buffers", r.comm_buffers}, {"workspace", r.workspace},
                    {"activations", r.activations}, {"logits", r.logits},
                    {"runtime_overhead", r.overhead}, {"total", r.total()}}},
         {"prefill_peak_bytes", r.prefill.total()},
         {"decode_peak_bytes", r.decode.total()},
         {"fits", r.fits}, {"prefill_s", r.prefill_s},
         {"prefill_bytes_sent", r.prefill_bytes},
         {"decode_step_s", r.decode_token_s},
         {"decode_bytes_sent_per_step", r.decode_bytes},
         {"decode_tokens_per_s", r.decode_tokens_per_s}});
  out["inference"] = std::move(inf);
  return out;
}

void print_plan_table(std::ostream& out, const PlanReport& p) {
  out << fmt::format(
      "model {} (L={} h={} heads {}/{} f={} V={}) | seq {} x micro-batch {} per replica x {} per "
      "step | {} "
      "devices, {} per "
      "node | {} | recompute {} | hardware {}: {} GiB/device, {:.1f} TFLOP/s achievable, "
      "runtime overhead {} GiB per device (included in total)\n",
      p.source, p.model.num_hidden_layers, p.model.hidden_size, p.model.num_attention_heads,
      p.model.num_key_value_heads, p.model.intermediate_size, p.model.vocab_size, p.seq,
      p.global_batch > 0 ? fmt::format("{} / (dp x {})", p.global_batch, p.grad_accum)
                         : std::to_string(p.batch),
      p.grad_accum, p.world, p.hw.devices_per_node, p.precision.name, p.recompute, p.hw.name,
      gib(p.hw.memory_bytes),
      p.hw.flops_per_s(p.precision) / 1e12, gib(p.hw.runtime_overhead_bytes));
  // The convention of the optim column (core/precision.h, model/optimizer.h).
  out << fmt::format(
      "optim = AdamW's two moments{} per parameter of the device's shards, {}\n",
      p.precision.master > 0 ? " and the fp32 master copy" : "",
      p.shard_optimizer ? "sharded over dp (--shard-optimizer, ZeRO-1: dp rank 0's slice, "
                          "1/dp rounded up per tensor)"
                        : "whole on every dp rank (--shard-optimizer splits it over dp)");
  if (std::any_of(p.rows.begin(), p.rows.end(),
                  [](const plan::PlanRow& r) { return r.layout.pp > 1; }))
    out << fmt::format(
        "pp rows: {} micro-batch(es) a step through balanced stages (1F1B; --grad-accum sets "
        "them), memory of the worst stage, MiB sent by the busiest stage's rank, step = the "
        "schedule's critical path + the step reductions, bubble = the busiest stage's idle "
        "share of it\n",
        p.grad_accum);
  const bool documents = p.documents != nullptr;  // then two columns more
  if (documents)
    out << fmt::format(
        "packed documents ({}, implies --document-masking): {} sample rows, {:.1f} documents "
        "per row, masked attention {:.1f}% of causal, layout {}; attn imb = the sequence "
        "ranks' max/mean - 1 of attention work (mean over micro-batches), attn TF = masked "
        "attention TFLOP per device per step\n",
        p.documents->source, p.documents->rows.size(), p.documents->documents_per_row(),
        100.0 * masked_fraction(*p.documents), parallel::token_layout_name(p.documents->layout));
  out << fmt::format(
      "  {:<21} {:>2} {:>2} {:>2} {:>2} {:>3} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} | "
      "{:>8} {:>4} | {:>10} {:>10} | {:>9} {:>9} {:>6} {:>11} | {:>8}{}\n",
      "strategy", "pp", "dp", "tp", "sp", "tsp", "params", "grads", "optim", "saved", "comm",
      "work", "logits", "totalGiB", "fits", "intraMiB", "interMiB", "step s", "exposed", "bubble",
      "tokens/s", "max seq", documents ? fmt::format(" | {:>8} {:>8}", "attn imb", "attn TF") : "");
  const bool fixed_global = p.global_batch > 0;  // then each row says its micro-batch
  for (const plan::PlanRow& r : p.rows) {
    const plan::Layout& l = r.layout;
    const std::string head =
        fmt::format("{} {:<21} {:>2} {:>2} {:>2} {:>2} {:>3}", r.recommended ? "*" : " ",
                    strategy_label(l), l.pp, l.dp, l.tp, l.sp, l.tsp);
    if (!r.error.empty()) {
      out << head << " | infeasible: " << r.error << "\n";
      continue;
    }
    const plan::Prediction& p = r.prediction;
    const plan::Memory& m = p.memory;
    out << fmt::format(
        "{} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} | {:>8} {:>4} | {:>10.1f} {:>10.1f} | "
        "{:>9.3g} {:>9.3g} {:>6} {:>11.4g} | {:>8}{}{}\n",
        head, gib(m.parameters), gib(m.gradients), gib(m.optimizer), gib(m.activations),
        gib(m.comm_buffers), gib(m.workspace), gib(m.logits), gib(m.total()), p.fits ? "yes" : "no",
        double(p.intra_bytes) / (1 << 20), double(p.inter_bytes) / (1 << 20), p.step_s,
        p.exposed_comm_s, l.pp > 1 ? fmt::format("{:.1f}%", 100.0 * p.bubble) : "-", p.tokens_per_s,
        r.max_seq,
        documents ? fmt::format(" | {:>7.1f}% {:>8.3g}", 100.0 * p.attention_imbalance,
                                p.attention_flops_per_device / 1e12)
                  : "",
        fixed_global ? fmt::format(" | micro-batch {}", p.micro_batch) : "");
  }
  print_comm_breakdown(out, p);
  out << "longest sequence that fits ("
      << (p.global_batch > 0 ? fmt::format("global batch {}", p.global_batch)
                             : fmt::format("micro-batch {}", p.batch))
      << "):";
  for (const auto& [name, best] : p.longest)
    out << (best.first > 0 ? fmt::format(" {} {} (dp {});", name, best.first, best.second.dp)
                                 : fmt::format(" {} none;", name));
  out << "\ninference, TSP prefill of the prompt + decode with a head-sharded KV cache (memory "
         "and decode bytes checked against the engine, times against its dry run's virtual "
         "clock; prefill weight bytes unchecked):\n";
  for (const plan::InferenceRow& r : p.inference)
    out << fmt::format(
        "  tsp {:>2}: params {} + KV cache {} + buffers {} + workspace {} + activations {} + "
        "logits {} + overhead {} = {} GiB ({}), prefill {:.3g} s, decode {:.3g} s/step = "
        "{:.4g} tokens/s per replica\n",
        r.degree, gib(r.parameters), gib(r.kv_cache), gib(r.comm_buffers), gib(r.workspace),
        gib(r.activations), gib(r.logits), gib(r.overhead), gib(r.total()),
        r.fits ? "fits" : "does not fit", r.prefill_s, r.decode_token_s,
        r.decode_tokens_per_s);
  for (const auto& e : p.inference_errors) out << "  " << e << "\n";
}

}  // namespace origami::cli
