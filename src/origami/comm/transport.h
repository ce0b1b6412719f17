// A transport is the point-to-point layer under every communicator: tagged, asynchronous
// sends and receives of bytes between the world ranks of one process group, matched by
// (communicator id, source, tag) in posting order (messages between a pair on one tag never
// overtake each other). The collectives are written once over it (collectives/), so every
// transport moves the same, measured bytes. A transport completes an operation by calling
// OpState::complete (from any thread) and installs OpState::cancel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "origami/comm/handle.h"
#include "origami/comm/link_model.h"

namespace origami::comm {

// One half of a point-to-point transfer as the communicator hands it to a transport.
struct P2POp {
  std::uint64_t comm = 0;  // communicator id (equal on every member)
  int peer_world = 0;      // the other side, as a world rank
  int peer_group = 0;      // the other side, as a rank of the communicator
  std::int64_t tag = 0;    // user tags are >= 0; collectives use tags >= 2^30
  void* recv_data = nullptr;        // receives
  const void* send_data = nullptr;  // sends
  std::int64_t bytes = 0;
  std::shared_ptr<detail::OpState> state;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;
  virtual const LinkModel& link_model() const = 0;
  virtual void post_send(P2POp op) = 0;
  virtual void post_recv(P2POp op) = 0;
  // Called by every member of `parent` with the same arguments as Communicator::split
  // (MPI creates a matching MPI communicator; in-process transports need nothing).
  virtual void create_group(std::uint64_t /*parent*/, std::uint64_t /*child*/, int /*color*/,
                            int /*key*/) {}
  // True once the world has been aborted (a rank failed); the message says why.
  virtual bool aborted(std::string* /*why*/) const { return false; }
};

}  // namespace origami::comm
