#include "origami/dryrun/rank_figures.h"

#include <algorithm>

#include <fmt/format.h>

namespace origami {

std::map<std::string, comm::CommStats> comm_by_name(comm::Communicator& world) {
  std::map<std::string, comm::CommStats> out;
  for (comm::CommStats& s : world.family_stats()) {
    if (s.ops.empty()) continue;
    std::string name = s.comm;
    for (int i = 2; out.count(name) > 0; ++i) name = fmt::format("{}#{}", s.comm, i);
    out[name] = std::move(s);
  }
  return out;
}

std::map<std::string, comm::CommStats> comm_since(
    const std::map<std::string, comm::CommStats>& before,
    const std::map<std::string, comm::CommStats>& after) {
  std::map<std::string, comm::CommStats> out;
  for (const auto& [name, s] : after) {
    comm::CommStats d = s;
    d.ops.clear();
    const auto was = before.find(name);
    for (const auto& [kind, st] : s.ops) {
      comm::OpStats x = st;
      if (was != before.end()) {
        const comm::OpStats& b = was->second.op(kind);
        x.calls -= b.calls;
        x.messages_sent -= b.messages_sent;
        x.messages_received -= b.messages_received;
        x.bytes_sent -= b.bytes_sent;
        x.bytes_received -= b.bytes_received;
        x.time_s -= b.time_s;
        x.exposed_s -= b.exposed_s;
      }
      if (x.calls != 0 || x.bytes_sent != 0 || x.bytes_received != 0) d.ops[kind] = x;
    }
    if (!d.ops.empty()) out[name] = std::move(d);
  }
  return out;
}

void fill_rank_figures(const MemoryStats& memory, std::map<std::string, comm::CommStats> comm,
                       const dryrun::Clock& clock, DryRunRank& out) {
  out.memory = memory;
  out.comm = std::move(comm);
  out.comm_total = {};
  for (const auto& [axis, s] : out.comm)
    for (const auto& [kind, st] : s.ops) out.comm_total.ops[kind] += st;
  out.clock_s = clock.now_s;
  out.compute_s = clock.compute_s;
  out.flops = clock.flops;
  out.attention_flops = clock.attention_flops;
}

std::string rank_tables(const std::vector<DryRunRank>& ranks, const std::string& step) {
  std::string out = "peak memory per rank by category:\nrank";
  std::vector<std::size_t> width;
  for (int c = 0; c < kNumMemCategories; ++c) {
    const std::string_view name = mem_category_name(static_cast<MemCategory>(c));
    width.push_back(std::max<std::size_t>(12, name.size() + 2));
    out += fmt::format("{:>{}}", name, width.back());
  }
  out += fmt::format("{:>14}\n", "peak total");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    for (int c = 0; c < kNumMemCategories; ++c)
      out += fmt::format("{:>{}}", format_bytes(ranks[r].memory.peak[static_cast<std::size_t>(c)]),
                         width[static_cast<std::size_t>(c)]);
    out += fmt::format("{:>14}\n", format_bytes(ranks[r].memory.peak_total));
  }
  out += "bytes per rank by operation (sent / received, all axes):\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    for (const auto& [kind, s] : ranks[r].comm_total.ops) {
      if (s.bytes_sent == 0 && s.bytes_received == 0) continue;
      out += fmt::format("  {} {} / {}", kind, format_bytes(s.bytes_sent),
                         format_bytes(s.bytes_received));
    }
    out += "\n";
  }
  out += "virtual communication time and exposed (waited) time by operation, whole run:\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    double time_s = 0, exposed_s = 0;
    for (const auto& [kind, s] : ranks[r].comm_total.ops) {
      if (s.time_s <= 0) continue;
      out += fmt::format("  {} {:.4g}/{:.4g} s", kind, s.time_s, s.exposed_s);
      time_s += s.time_s;
      exposed_s += s.exposed_s;
    }
    out += fmt::format("  | all {:.4g}/{:.4g} s ({:.1f}% exposed)\n", time_s, exposed_s,
                       time_s > 0 ? 100 * exposed_s / time_s : 0.0);
  }
  out += fmt::format("virtual time per rank ({}, of which kernels over the whole run):\n", step);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    out += fmt::format("{:<4}  step {:.6f} s  compute {:.6f} s  {:.4g} TFLOP ({:.4g} attention)\n",
                       r, ranks[r].step_s, ranks[r].compute_s, ranks[r].flops / 1e12,
                       ranks[r].attention_flops / 1e12);
  return out;
}

nlohmann::json rank_json(const DryRunRank& k) {
  nlohmann::json rj;
  nlohmann::json peak, cur;
  for (int c = 0; c < kNumMemCategories; ++c) {
    const std::string name(mem_category_name(static_cast<MemCategory>(c)));
    peak[name] = k.memory.peak[static_cast<std::size_t>(c)];
    cur[name] = k.memory.current[static_cast<std::size_t>(c)];
  }
  peak["total"] = k.memory.peak_total;
  rj["peak_bytes"] = peak;
  rj["current_bytes"] = cur;
  nlohmann::json comm;
  for (const auto& [axis, s] : k.comm) {
    nlohmann::json a;
    for (const auto& [kind, st] : s.ops)
      a[kind] = {{"calls", st.calls},
                 {"bytes_sent", st.bytes_sent},
                 {"bytes_received", st.bytes_received}};
    comm[axis] = a;
  }
  rj["comm"] = comm;
  rj["clock_s"] = k.clock_s;
  rj["step_s"] = k.step_s;
  rj["compute_s"] = k.compute_s;
  rj["flops"] = k.flops;
  rj["attention_flops"] = k.attention_flops;
  return rj;
}

}  // namespace origami
