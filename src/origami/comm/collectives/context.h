// What a collective algorithm sees: its rank and size, asynchronous sends and receives of
// bytes to other ranks of the group (tagged with the collective's sequence number and
// accounted under its kind), bounded waits, and staging memory on the rank's tracker.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "origami/comm/handle.h"
#include "origami/core/tensor.h"

namespace origami::comm::detail {

class CommImpl;

class CollectiveContext {
 public:
  // fp32_data: the collective moves fp32 elements (the dry run accounts them at the
  // profile's communication element size).
  CollectiveContext(CommImpl& comm, std::string kind, std::int64_t seq, bool fp32_data = false)
      : comm_(comm), kind_(std::move(kind)), seq_(seq), fp32_data_(fp32_data) {}
  int rank() const;
  int size() const;
  const std::string& kind() const { return kind_; }
  Handle send(const void* data, std::int64_t bytes, int peer);
  Handle recv(void* data, std::int64_t bytes, int peer);
  // Bounded by the communicator's timeout; throws CommError naming this collective.
  void wait(Handle& h);
  void wait_all(std::vector<Handle>& hs);
  // Raw bytes in MemCategory::CommBuffers on this rank's tracker (2-byte elements: every
  // element size here is even, so the accounted bytes are exact; fp32 elements for an fp32
  // collective, so that a dry-run profile accounts them at its communication size).
  Tensor staging(std::int64_t bytes);

 private:
  CommImpl& comm_;
  std::string kind_;
  std::int64_t seq_;
  bool fp32_data_;
};

// Byte offsets into a buffer; an unbacked (null, dry-run) buffer stays null at every offset.
inline char* at(void* p, std::int64_t off) {
  return p == nullptr ? nullptr : static_cast<char*>(p) + off;
}
inline const char* at(const void* p, std::int64_t off) {
  return p == nullptr ? nullptr : static_cast<const char*>(p) + off;
}
// memmove that does nothing when either side is unbacked (the dry run moves no bytes).
inline void move_bytes(void* dst, const void* src, std::int64_t n) {
  if (dst != nullptr && src != nullptr && n > 0 && dst != src)
    std::memmove(dst, src, static_cast<std::size_t>(n));
}
inline void* raw(Tensor& t) { return t.raw(); }

}  // namespace origami::comm::detail
