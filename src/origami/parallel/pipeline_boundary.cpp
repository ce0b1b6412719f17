#include "origami/parallel/pipeline_boundary.h"

#include <algorithm>
#include <vector>

#include "origami/core/error.h"

namespace origami::parallel {

std::optional<StagePass> reply_after(const PipelineSplit& split, int receiver, int sender,
                                     int micro_batches, const StagePass& consumed) {
  const std::vector<PipelineStep> order =
      pipeline_order(split.stages, split.virtual_stages, receiver, micro_batches);
  auto chunk = [&](const PipelineStep& s) { return split.chunk_of(receiver, s.chunk); };
  auto it = std::find_if(order.begin(), order.end(), [&](const PipelineStep& s) {
    return s.micro == consumed.step.micro && s.backward == consumed.step.backward &&
           chunk(s) == consumed.chunk;
  });
  ORIGAMI_CHECK(it != order.end(), "rank {} has no {} of chunk {}, micro-batch {}", receiver,
                consumed.step.backward ? "backward" : "forward", consumed.chunk,
                consumed.step.micro);
  const int last_chunk = split.chunk_count() - 1;
  for (; it != order.end(); ++it) {
    const int c = chunk(*it);
    const int to = it->backward ? c - 1 : c + 1;  // the chunk that takes this pass's output
    if (to < 0 || to > last_chunk || split.rank_of_chunk(to) != sender) continue;
    return StagePass{{it->micro, it->backward, to / split.stages}, to};
  }
  return std::nullopt;
}

BoundaryBlocks pipeline_boundary_blocks(const PipelineSplit& split, int stage, int micro_batches) {
  const int stages = split.stages, m = micro_batches, last_chunk = split.chunk_count() - 1;
  std::vector<StagePass> passes;
  for (const PipelineStep& step : pipeline_order(stages, split.virtual_stages, stage, m))
    passes.push_back({step, split.chunk_of(stage, step.chunk)});
  // Each direction's receives still to post, as rank_model_pipeline.cpp queues them.
  std::size_t activations_left = 0, gradients_left = 0;
  for (const StagePass& p : passes) {
    if (!p.step.backward && p.chunk > 0) ++activations_left;
    if (p.step.backward && p.chunk < last_chunk) ++gradients_left;
  }
  // A held send: whether it is a received block, and the reply that frees it (none: the
  // step's end).
  struct Held {
    bool comm = false;
    std::optional<StagePass> reply;
  };
  std::vector<Held> held;
  int comm = (activations_left > 0) + (gradients_left > 0);  // the first receives
  BoundaryBlocks peak;
  peak.comm_buffers = comm;
  constexpr int kNone = -(1 << 30);
  peak.workspace_forward = peak.workspace_backward = kNone;
  // The pass's input arrives: the sends it answers are freed, the direction's next receive
  // posted (the received block itself becomes the pass's stream).
  auto take = [&](const StagePass& pass, std::size_t& left) {
    std::erase_if(held, [&](const Held& h) {
      const bool answered = h.reply && h.reply->step.micro == pass.step.micro &&
                            h.reply->chunk == pass.chunk &&
                            h.reply->step.backward == pass.step.backward;
      if (answered && h.comm) --comm;
      return answered;
    });
    if (--left > 0) ++comm;
    peak.comm_buffers = std::max(peak.comm_buffers, comm);
  };
  // The Workspace difference while the pass computes on its stream.
  auto computing = [&](bool backward, bool received) {
    const int sent = static_cast<int>(std::count_if(held.begin(), held.end(),
                                                    [](const Held& h) { return !h.comm; }));
    int& worst = backward ? peak.workspace_backward : peak.workspace_forward;
    worst = std::max(worst, sent - (received ? 1 : 0));
  };
  auto send = [&](bool received, int to, int micro, bool backward) {
    held.push_back({received, reply_after(split, split.rank_of_chunk(to), stage, m,
                                          StagePass{{micro, backward, to / stages}, to})});
  };
  for (const StagePass& pass : passes) {
    const int i = pass.step.micro, c = pass.chunk;
    if (!pass.step.backward) {
      const bool received = c > 0;  // else the embedding's output
      if (received) take(pass, activations_left);
      computing(false, received);
      // The last chunk keeps its input as the final norm's until its backward, next.
      if (c < last_chunk) send(received, c + 1, i, false);
    } else {
      const bool received = c < last_chunk;  // else the driver's, from the loss
      if (received) {
        take(pass, gradients_left);
      } else if (c > 0) {
        --comm;  // the final norm's input, a received block, is freed
      }
      computing(true, received);
      if (c > 0) send(received, c - 1, i, true);
      else if (received) --comm;  // applied to the embedding, freed
    }
  }
  return peak;
}

BoundarySends pipeline_boundary_sends(const PipelineSplit& split, int stage, int micro_batches) {
  const int last_chunk = split.chunk_count() - 1;
  BoundarySends n;
  for (const PipelineStep& step :
       pipeline_order(split.stages, split.virtual_stages, stage, micro_batches)) {
    const int c = split.chunk_of(stage, step.chunk);
    if (!step.backward) {
      n.forward += c < last_chunk;
      n.forward_recvs += c > 0;
    } else {
      n.backward += c > 0;
      n.backward_recvs += c < last_chunk;
    }
  }
  return n;
}

}  // namespace origami::parallel
