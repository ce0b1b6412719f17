// What every strategy's schedule.h lists (strategies/tsp/, strategies/mesh/): one kind of
// message a rank issues in a micro-batch.
#pragma once

#include <cstdint>

namespace origami::parallel {

// `calls` Communicator calls `op` on `comm` sending `bytes` in total from this rank, in the
// forward or backward pass, inside the layers (all L of them together) or once per model.
struct ScheduleMessage {
  const char* block;
  const char* comm;
  const char* op;
  bool forward;
  bool in_layers;
  std::int64_t calls, bytes;
};

}  // namespace origami::parallel
