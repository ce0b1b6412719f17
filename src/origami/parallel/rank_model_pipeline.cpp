// A pipeline rank's part of a step (RankModel::accumulate with pp > 1): the rank's order
// (pipeline_schedule.h: 1F1B, or interleaved 1F1B over its v chunks) over the step's
// micro-batches. For a pass of micro-batch i through chunk c (pipeline_stages.h's mapping):
//   forward    its input stream rows from chunk c - 1's rank (chunk 0 embeds), its output sent
//              to chunk c + 1's rank (the last chunk computes the loss instead);
//   backward   the gradient of its output from chunk c + 1's rank (the last chunk starts from
//              the loss), the gradient of its input sent to chunk c - 1's rank (chunk 0
//              applies it to the embedding).
// Chunk c - 1 lives on the previous pp rank and c + 1 on the next, cyclically (under
// interleaving the last rank's chunk c < p v - 1 sends to rank 0's chunk c + 1), so each rank
// receives activations from one peer and gradients from one (the same one at p = 2; the tags,
// one per chunk, micro-batch and direction, tell them apart).
// Each rank sends only its own stream rows (under sp/tsp they stay sequence-sharded), to the
// rank of the neighbouring stage at the same dp/tp/sp/tsp coordinates: groups.pp(), whose rank
// is the stage, and that rank holds the same rows. Each direction's receive is posted one
// message ahead of its use (in the order the schedule consumes them), so the neighbour's
// message lands while this rank computes. Sends complete in the background; each sent buffer
// is kept until a fixed point of this rank's order, the first message back from the same
// neighbour that the neighbour sends only after consuming this one (reply_after), or the
// step's end, and waited for and freed there: the tracker sees the same frees in every run,
// whatever the timing, which is what the dry run replays (docs/dry-run.md, "Pipeline
// stages"); the wait finds the send done (the reply proves it arrived), so it never stalls.
// Every wait is bounded by the communicator's timeout (communicator.h). The time blocked in
// those receives and in the closing pp barrier (wait_for_stages, after the stage's gradient
// reductions) is the rank's measured bubble. A mixture of experts' balance is recorded per
// pass (StrategyOps::set_pass, the driver's key c * m + i) and each forward's share of the
// aux loss and of the expert load read after it (summed over pp by sum_over_stages). The planner
// replays what this holds (pipeline_boundary.h): keep the two in step.
#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "origami/core/error.h"
#include "origami/parallel/pipeline_boundary.h"
#include "origami/parallel/rank_model.h"

namespace origami::parallel {

namespace {

// Message tags of micro-batch i's pass through chunk c (the sending chunk; m micro-batches a
// step): its output activations (forward) and its input gradient (backward), one tag each.
int pipeline_activation_tag(int chunk, int micro, int micro_batches) {
  return 2 * (chunk * micro_batches + micro);
}
int pipeline_gradient_tag(int chunk, int micro, int micro_batches) {
  return pipeline_activation_tag(chunk, micro, micro_batches) + 1;
}

// One direction's receives, in the order the schedule consumes them.
struct StageInbox {
  int peer = -1;                 // the neighbouring rank of this direction
  std::vector<StagePass> queue;  // the passes whose input comes from `peer`, in order
  std::size_t next = 0;          // the queue entry whose receive is posted (or size: none left)
  Tensor buffer;
  comm::Handle handle;
};

}  // namespace

RankModel::Accumulated RankModel::accumulate_stage(const std::vector<LocalBatch>& micro,
                                                   double grad_scale) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  double waited = 0;
  auto timed_wait = [&](comm::Handle& h) {
    const Clock::time_point t = Clock::now();
    h.wait();
    waited += std::chrono::duration<double>(Clock::now() - t).count();
  };
  comm::Communicator& pp = groups_.pp();
  const PipelineSplit& split = stages_;
  const int stages = pp.size(), m = static_cast<int>(micro.size());
  const int last_chunk = split.chunk_count() - 1;
  const std::int64_t h = config_.hidden_size;
  check_pipeline_schedule(stages, split.virtual_stages, m);

  std::vector<StagePass> passes;
  for (const PipelineStep& step : pipeline_order(stages, split.virtual_stages, stage_, m))
    passes.push_back({step, split.chunk_of(stage_, step.chunk)});

  // The stream rows of micro-batch i on this rank (its batch handed to the strategy).
  auto use_batch = [&](int i) {
    ops_->set_batch(&micro[static_cast<std::size_t>(i)]);
    return ops_->stream_rows();
  };
  auto tag_of = [m](const StagePass& pass) {
    return pass.step.backward ? pipeline_gradient_tag(pass.chunk + 1, pass.step.micro, m)
                              : pipeline_activation_tag(pass.chunk - 1, pass.step.micro, m);
  };
  auto post = [&](StageInbox& box) {
    if (box.next >= box.queue.size()) return;
    const StagePass& pass = box.queue[box.next];
    box.buffer = Tensor(tracker_, MemCategory::CommBuffers, {use_batch(pass.step.micro), h});
    box.handle = pp.irecv(box.buffer, box.peer, tag_of(pass));
  };
  // A send in flight, freed when `release` (the inbox of the neighbour's reply) takes the
  // reply of chunk `chunk`, micro-batch `micro` (reply_after), or at the step's end (release
  // null).
  struct Sending {
    Tensor buffer;
    comm::Handle handle;
    const StageInbox* release = nullptr;
    int chunk = -1, micro = -1;
  };
  std::vector<Sending> sending;
  auto take = [&](StageInbox& box, const StagePass& pass) {
    ORIGAMI_CHECK(box.next < box.queue.size() && box.queue[box.next].chunk == pass.chunk &&
                      box.queue[box.next].step.micro == pass.step.micro,
                  "rank {} expected another message than chunk {}'s of micro-batch {}", stage_,
                  pass.chunk, pass.step.micro);
    timed_wait(box.handle);
    Tensor got = std::move(box.buffer);
    ++box.next;
    // This message proves the sends it answers arrived: free them before the next receive's
    // buffer is allocated.
    std::erase_if(sending, [&](Sending& s) {
      if (s.release != &box || s.chunk != pass.chunk || s.micro != pass.step.micro) return false;
      timed_wait(s.handle);
      return true;
    });
    post(box);  // the next one's receive, before this one's compute
    return got;
  };
  StageInbox activations, gradients;
  activations.peer = (stage_ + stages - 1) % stages;
  gradients.peer = (stage_ + 1) % stages;
  for (const StagePass& pass : passes) {
    if (!pass.step.backward && pass.chunk > 0) activations.queue.push_back(pass);
    if (pass.step.backward && pass.chunk < last_chunk) gradients.queue.push_back(pass);
  }
  post(activations);
  post(gradients);

  // Micro-batch i's pass through chunk `from` sends its output to chunk `to` (a forward's to
  // the next chunk, a backward's to the previous), which consumes it in the same direction.
  auto send = [&](Tensor t, int from, int to, int i, bool backward) {
    const int peer = split.rank_of_chunk(to);
    comm::Handle handle = pp.isend(t, peer, backward ? pipeline_gradient_tag(from, i, m)
                                                     : pipeline_activation_tag(from, i, m));
    const std::optional<StagePass> reply =
        reply_after(split, peer, stage_, m, StagePass{{i, backward, to / stages}, to});
    // A reply forward comes in as activations, a reply backward as gradients.
    const StageInbox* box = !reply ? nullptr : reply->step.backward ? &gradients : &activations;
    sending.push_back({std::move(t), std::move(handle), box, reply ? reply->chunk : -1,
                       reply ? reply->step.micro : -1});
  };

  // A mixture of experts: each micro-batch's balance weighs 1 / m in the step's aux; a pass's
  // balance records (its chunk's layers) are its own (set_pass), as the driver's saved state,
  // and read after its forward (a recomputed forward in its backward re-records, counted once).
  Accumulated r;
  const double aux_weight = 1.0 / static_cast<double>(std::max(1, m));
  ops_->set_aux_weight(aux_weight);
  for (const StagePass& pass : passes) {
    const int i = pass.step.micro, c = pass.chunk;
    const int id = c * m + i;  // the driver's key of this pass's saved state
    if (!pass.step.backward) {
      Tensor x = c == 0 ? Tensor() : take(activations, pass);
      use_batch(i);
      ops_->set_pass(id);
      const StageLayers& layers = split.chunks[static_cast<std::size_t>(c)];
      r.loss_sum += driver_.stage_forward(id, layers.first, layers.first + layers.count, x).sum;
      r.aux += aux_weight * ops_->router_aux_loss();
      r.moe.add(ops_->moe_load());
      if (c < last_chunk) send(std::move(x), c, c + 1, i, false);
    } else {
      Tensor dx = c == last_chunk ? Tensor() : take(gradients, pass);
      use_batch(i);
      ops_->set_pass(id);
      driver_.stage_backward(id, grad_scale, dx);
      if (c > 0) send(std::move(dx), c, c - 1, i, true);
    }
  }
  ops_->set_batch(nullptr);
  for (Sending& s : sending) timed_wait(s.handle);  // those no reply answers this step
  sending.clear();
  pipeline_wait_seconds_ = waited;
  pipeline_start_ = start;
  return r;
}

void RankModel::wait_for_stages() {
  if (groups_.plan().pp <= 1) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t = Clock::now();
  comm::Handle all_done = groups_.pp().ibarrier();  // bounded by the communicator's timeout
  all_done.wait();
  const Clock::time_point end = Clock::now();
  pipeline_wait_seconds_ += std::chrono::duration<double>(end - t).count();
  pipeline_seconds_ = std::chrono::duration<double>(end - pipeline_start_).count();
}

}  // namespace origami::parallel
