#include "origami/comm/op_log.h"

#include <fmt/format.h>

namespace origami::comm {

void OpLog::add(OpLogEntry e) {
  std::lock_guard lock(mutex_);
  entries_.push_back(std::move(e));
  while (entries_.size() > capacity_) entries_.pop_front();
}

std::string OpLog::dump() const {
  std::lock_guard lock(mutex_);
  if (entries_.empty()) return "  (no operations)\n";
  const auto now = std::chrono::steady_clock::now();
  std::string s;
  for (const auto& e : entries_) {
    const double ago = std::chrono::duration<double>(now - e.time).count();
    s += fmt::format("  -{:.3f}s comm={} op={} seq={} {} bytes={} peer={}\n", ago, e.comm, e.op,
                     e.seq, e.event, e.bytes, e.peer < 0 ? std::string("all") : std::to_string(e.peer));
  }
  return s;
}

}  // namespace origami::comm
