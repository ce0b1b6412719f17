// What a collective algorithm sees: its rank and size, asynchronous sends and receives of
// bytes to other ranks of the group (tagged with the collective's sequence number and
// accounted under its kind), bounded waits, and staging memory on the rank's tracker.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "origami/comm/handle.h"
#include "origami/core/tensor.h"

namespace origami::comm::detail {

class CommImpl;

class CollectiveContext {
 public:
  CollectiveContext(CommImpl& comm, std::string kind, std::int64_t seq)
      : comm_(comm), kind_(std::move(kind)), seq_(seq) {}
  int rank() const;
  int size() const;
  const std::string& kind() const { return kind_; }
  Handle send(const void* data, std::int64_t bytes, int peer);
  Handle recv(void* data, std::int64_t bytes, int peer);
  // Bounded by the communicator's timeout; throws CommError naming this collective.
  void wait(Handle& h);
  void wait_all(std::vector<Handle>& hs);
  // Raw bytes in MemCategory::CommBuffers on this rank's tracker (2-byte elements: every
  // element size here is even, so the accounted bytes are exact).
  Tensor staging(std::int64_t bytes);

 private:
  CommImpl& comm_;
  std::string kind_;
  std::int64_t seq_;
};

inline char* at(void* p, std::int64_t off) { return static_cast<char*>(p) + off; }
inline const char* at(const void* p, std::int64_t off) { return static_cast<const char*>(p) + off; }
inline void* raw(Tensor& t) { return t.raw(); }

}  // namespace origami::comm::detail
