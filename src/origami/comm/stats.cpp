#include "origami/comm/stats.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/core/memory_tracker.h"

namespace origami::comm {

OpStats& OpStats::operator+=(const OpStats& o) {
  calls += o.calls;
  messages_sent += o.messages_sent;
  messages_received += o.messages_received;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  time_s += o.time_s;
  exposed_s += o.exposed_s;
  return *this;
}

OpStats CommStats::total() const {
  OpStats t;
  for (const auto& [k, s] : ops) t += s;
  return t;
}

const OpStats& CommStats::op(const std::string& kind) const {
  static const OpStats kZero;
  auto it = ops.find(kind);
  return it == ops.end() ? kZero : it->second;
}

std::string CommStats::summary() const {
  std::string s = fmt::format("comm '{}' rank {}\n{:<16} {:>8} {:>12} {:>12} {:>10} {:>10}\n", comm,
                              rank, "op", "calls", "sent", "received", "time ms", "exposed ms");
  auto line = [&](const std::string& k, const OpStats& o) {
    s += fmt::format("{:<16} {:>8} {:>12} {:>12} {:>10.3f} {:>10.3f}\n", k, o.calls,
                     format_bytes(o.bytes_sent), format_bytes(o.bytes_received), o.time_s * 1e3,
                     o.exposed_s * 1e3);
  };
  for (const auto& [k, o] : ops) line(k, o);
  line("total", total());
  return s;
}

std::string CommStats::to_json() const {
  nlohmann::json j;
  j["rank"] = rank;
  j["comm"] = comm;
  for (const auto& [k, o] : ops) {
    j["ops"][k] = {{"calls", o.calls},
                   {"messages_sent", o.messages_sent},
                   {"messages_received", o.messages_received},
                   {"bytes_sent", o.bytes_sent},
                   {"bytes_received", o.bytes_received},
                   {"time_s", o.time_s},
                   {"exposed_s", o.exposed_s}};
  }
  return j.dump();
}

CommStats CommStats::from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  CommStats s;
  s.rank = j.at("rank").get<int>();
  s.comm = j.at("comm").get<std::string>();
  if (j.contains("ops")) {
    for (const auto& [k, v] : j.at("ops").items()) {
      OpStats o;
      o.calls = v.at("calls").get<std::int64_t>();
      o.messages_sent = v.at("messages_sent").get<std::int64_t>();
      o.messages_received = v.at("messages_received").get<std::int64_t>();
      o.bytes_sent = v.at("bytes_sent").get<std::int64_t>();
      o.bytes_received = v.at("bytes_received").get<std::int64_t>();
      o.time_s = v.at("time_s").get<double>();
      o.exposed_s = v.at("exposed_s").get<double>();
      s.ops[k] = o;
    }
  }
  return s;
}

void StatsStore::add_call(const std::string& kind) {
  std::lock_guard lock(mutex_);
  ops_[kind].calls += 1;
}
void StatsStore::add_sent(const std::string& kind, std::int64_t bytes) {
  std::lock_guard lock(mutex_);
  auto& o = ops_[kind];
  o.messages_sent += 1;
  o.bytes_sent += bytes;
}
void StatsStore::add_received(const std::string& kind, std::int64_t bytes) {
  std::lock_guard lock(mutex_);
  auto& o = ops_[kind];
  o.messages_received += 1;
  o.bytes_received += bytes;
}
void StatsStore::add_time(const std::string& kind, double seconds) {
  std::lock_guard lock(mutex_);
  ops_[kind].time_s += seconds;
}
void StatsStore::add_exposed(const std::string& kind, double seconds) {
  std::lock_guard lock(mutex_);
  ops_[kind].exposed_s += seconds;
}
CommStats StatsStore::snapshot(int rank, const std::string& comm) const {
  std::lock_guard lock(mutex_);
  CommStats s;
  s.rank = rank;
  s.comm = comm;
  s.ops = ops_;
  return s;
}
void StatsStore::reset() {
  std::lock_guard lock(mutex_);
  ops_.clear();
}

}  // namespace origami::comm
