// A pipeline rank's boundary messages (rank_model_pipeline.cpp): which pass of a neighbour
// answers a send (reply_after, the fixed point at which the send's buffer is freed), and,
// replaying the rank's order with that rule, the most boundary rows [stream rows, h] the rank
// holds at once per memory category, for the planner (plan::memory_of_stage), and the
// messages it sends and receives (pipeline_boundary_sends, for plan::predict).
#pragma once

#include <optional>

#include "origami/parallel/pipeline_schedule.h"
#include "origami/parallel/pipeline_stages.h"

namespace origami::parallel {

// One chunk pass of the schedule, with its global chunk.
struct StagePass {
  PipelineStep step;
  int chunk = 0;  // global chunk (PipelineSplit::chunk_of)
};

// The first message rank `receiver` sends to rank `sender` once it has consumed the message
// `sender` sent for the receiver's pass `consumed`: the receiver's order (a pure function)
// runs `consumed` and, from that pass on, the first pass whose output goes to `sender` (a
// forward's activations to the next chunk's rank, a backward's input gradient to the previous
// chunk's) sends it. Returns the sender's pass that takes that message, or none when the
// receiver sends nothing more to `sender` this step.
std::optional<StagePass> reply_after(const PipelineSplit& split, int receiver, int sender,
                                     int micro_batches, const StagePass& consumed);

// What rank `stage`'s boundary blocks (row blocks [stream rows, h]) add to its memory over a
// step. A received block (CommBuffers) is the stream the pass computes on and what it sends
// on; the first chunk's forward output and the last chunk's backward input are the driver's
// (Workspace), as a rank without stages has its stream. CommBuffers holds each direction's
// posted receive (one ahead), the received block a pass computes on, the last chunk's input
// until its backward (the final norm's) and the received blocks sent on, until their release
// (reply_after) or the step's end: `comm_buffers` is the most of them at once. Workspace, as
// against a rank without stages, holds the Workspace blocks sent and not yet released, less
// the stream when it is a received block: `workspace_forward` (`_backward`) is the most of that
// during a forward (backward) pass.
struct BoundaryBlocks {
  int comm_buffers = 0;
  int workspace_forward = 0, workspace_backward = 0;
};
BoundaryBlocks pipeline_boundary_blocks(const PipelineSplit& split, int stage, int micro_batches);

// The boundary messages rank `stage` sends and receives over a step, one block [stream rows,
// h] each (rank_model_pipeline.cpp): a forward of any chunk but the last sends its output
// activations, a backward of any chunk but the first its input gradient; it receives the
// inputs of the forwards of every chunk but the first and of the backwards of every chunk
// but the last. For the planner's boundary traffic (plan::predict, docs/planner.md).
struct BoundarySends {
  int forward = 0, backward = 0;              // sends: activations, gradients
  int forward_recvs = 0, backward_recvs = 0;  // receives: activations, gradients
};
BoundarySends pipeline_boundary_sends(const PipelineSplit& split, int stage, int micro_batches);

}  // namespace origami::parallel
