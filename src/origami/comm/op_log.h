// A rank's recent communication history, shared by all its communicators. When a wait times
// out, the error carries this log so the lagging rank and the operation it never reached can
// be identified (like a flight recorder).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace origami::comm {

struct OpLogEntry {
  std::chrono::steady_clock::time_point time;
  std::string comm;   // communicator name
  std::string op;     // "all_reduce", "send", ...
  std::string event;  // "issue", "post send", "post recv", "done", "failed"
  std::int64_t seq = 0;
  std::int64_t bytes = 0;
  int peer = -1;  // rank in the communicator; -1 for a whole collective
};

class OpLog {
 public:
  explicit OpLog(std::size_t capacity = 48) : capacity_(capacity) {}
  void add(OpLogEntry e);
  // The entries, oldest first, one per line, times relative to the newest.
  std::string dump() const;

 private:
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<OpLogEntry> entries_;
};

}  // namespace origami::comm
