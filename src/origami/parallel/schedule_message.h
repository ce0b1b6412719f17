// What every strategy's schedule.h lists (strategies/tsp/, strategies/mesh/): one kind of
// message a rank issues in a micro-batch, and the forward <-> backward pairs of messages.
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

// A block's forward message and its conjugate in backward (the transpose that carries the
// gradient back), as (comm, op) of the schedule's messages; nullptr is the identity (a block's
// input already whole on every rank, or a gradient that needs no sum). `layout` names the
// schedule the pair belongs to ("tsp"; the mesh's "tp", "tpsp", "sp").
struct ConjugatePair {
  const char* layout;
  const char* block;
  const char* forward_comm;
  const char* forward_op;
  const char* backward_comm;
  const char* backward_op;
};

}  // namespace origami::parallel
