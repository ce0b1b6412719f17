// Communication accounting, measured at the point-to-point layer. Each communicator keeps,
// per kind of operation (the collective's name for the bytes it causes; "send"/"recv" for
// user point-to-point): calls, messages and bytes sent and received, time in the operation
// (issue to completion, summed over calls) and exposed time (what callers spent blocked in
// wait()). Bytes are counted when a message completes, so they are what really moved.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace origami::comm {

struct OpStats {
  std::int64_t calls = 0;
  std::int64_t messages_sent = 0;
  std::int64_t messages_received = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  double time_s = 0;     // issue -> completion, summed over calls
  double exposed_s = 0;  // callers blocked in wait()

  OpStats& operator+=(const OpStats& o);
};

struct CommStats {
  int rank = 0;          // rank in the communicator the stats belong to
  std::string comm;      // communicator name
  std::map<std::string, OpStats> ops;

  OpStats total() const;
  const OpStats& op(const std::string& kind) const;  // zeros if absent
  // A table: one line per kind, then the total.
  std::string summary() const;
  std::string to_json() const;
  static CommStats from_json(const std::string& text);
};

// Thread-safe store behind one communicator (progress and worker threads update it).
class StatsStore {
 public:
  void add_call(const std::string& kind);
  void add_sent(const std::string& kind, std::int64_t bytes);
  void add_received(const std::string& kind, std::int64_t bytes);
  void add_time(const std::string& kind, double seconds);
  void add_exposed(const std::string& kind, double seconds);
  CommStats snapshot(int rank, const std::string& comm) const;
  void reset();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, OpStats> ops_;
};

}  // namespace origami::comm
