// A pipeline stage's part of a step (RankModel::accumulate with pp > 1): the stage's 1F1B order
// (pipeline_schedule.h) over the step's micro-batches.
//   forward of micro-batch i   its input stream rows from the previous stage (the first stage
//                              embeds), its output sent to the next (the last stage computes
//                              the loss instead);
//   backward of i              the gradient of its output from the next stage (the last stage
//                              starts from the loss), the gradient of its input sent to the
//                              previous (the first stage applies it to the embedding).
// Each rank sends only its own stream rows (under sp/tsp they stay sequence-sharded), to the
// rank of the neighbouring stage at the same dp/tp/sp/tsp coordinates: groups.pp(), whose rank
// is the stage, and that rank holds the same rows. Each direction's receive is posted one
// micro-batch ahead of its use, so the neighbour's message lands while this stage computes.
// Sends complete in the background; each sent buffer is kept until a fixed point of this
// stage's order, the first message back from the same neighbour that the neighbour sends only
// after consuming this one (reply_after), or the step's end, and waited for and freed there:
// the tracker sees the same frees in every run, whatever the timing, which is what the dry run
// replays (docs/dry-run.md, "Pipeline stages"); the wait finds the send done (the reply proves
// it arrived), so it never stalls. Every wait is bounded by the communicator's timeout
// (communicator.h). The time blocked in those receives and in a closing pp barrier is the
// stage's measured bubble.
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "origami/core/error.h"
#include "origami/parallel/pipeline_schedule.h"
#include "origami/parallel/rank_model.h"

namespace origami::parallel {

namespace {

// Message tags of micro-batch i: its activations (forward) and their gradient (backward).
int pipeline_activation_tag(int micro) {
  return 2 * micro;
}
int pipeline_gradient_tag(int micro) {
  return 2 * micro + 1;
}

// One direction's receives, in micro-batch order (1F1B consumes both directions in order).
struct StageInbox {
  int peer = -1;  // the neighbouring stage; -1: this direction receives nothing
  int (*tag)(int) = nullptr;
  int next = 0;  // the micro-batch whose receive is posted (or m: none left)
  Tensor buffer;
  comm::Handle handle;
};

// The first message stage `receiver` sends back after consuming this stage's message of
// micro-batch `micro`: the receiver's order (a pure function) runs the step consuming it (its
// forward of `micro` for an activation, its backward for a gradient) and then, at the next
// step of the other kind, sends back (a backward's input gradient goes to the previous stage,
// a forward's output to the next). Returns that step's micro-batch, or -1 when the receiver
// sends nothing back after it this step.
int reply_after(int stages, int receiver, int micro_batches, int micro, bool consumed_by_backward) {
  const std::vector<PipelineStep> order = one_f_one_b_order(stages, receiver, micro_batches);
  auto it = std::find_if(order.begin(), order.end(), [&](const PipelineStep& s) {
    return s.micro == micro && s.backward == consumed_by_backward;
  });
  ORIGAMI_CHECK(it != order.end(), "stage {} has no {} of micro-batch {}", receiver,
                consumed_by_backward ? "backward" : "forward", micro);
  it = std::find_if(std::next(it), order.end(),
                    [&](const PipelineStep& s) { return s.backward != consumed_by_backward; });
  return it == order.end() ? -1 : it->micro;
}

}  // namespace

double RankModel::accumulate_stage(const std::vector<LocalBatch>& micro, double grad_scale) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  double waited = 0;
  auto timed_wait = [&](comm::Handle& h) {
    const Clock::time_point t = Clock::now();
    h.wait();
    waited += std::chrono::duration<double>(Clock::now() - t).count();
  };
  comm::Communicator& pp = groups_.pp();
  const int stages = pp.size(), m = static_cast<int>(micro.size());
  const bool first = stage_ == 0, last = stage_ + 1 == stages;
  const std::int64_t layer0 = stages_[static_cast<std::size_t>(stage_)].first;
  const std::int64_t layer_end = layer0 + stages_[static_cast<std::size_t>(stage_)].count;
  const std::int64_t h = config_.hidden_size;

  // The stream rows of micro-batch i on this rank (its batch handed to the strategy).
  auto use_batch = [&](int i) {
    ops_->set_batch(&micro[static_cast<std::size_t>(i)]);
    return ops_->stream_rows();
  };
  auto post = [&](StageInbox& box) {
    if (box.peer < 0 || box.next >= m) return;
    box.buffer = Tensor(tracker_, MemCategory::CommBuffers, {use_batch(box.next), h});
    box.handle = pp.irecv(box.buffer, box.peer, box.tag(box.next));
  };
  // A send in flight, freed when `release` (the inbox of the neighbour's reply) takes
  // micro-batch `at` (reply_after), or at the step's end (release null).
  struct Sending {
    Tensor buffer;
    comm::Handle handle;
    const StageInbox* release = nullptr;
    int at = -1;
  };
  std::vector<Sending> sending;
  auto take = [&](StageInbox& box, int i) {
    ORIGAMI_CHECK(box.next == i, "stage {} expected micro-batch {}'s message, schedule is at {}",
                  stage_, box.next, i);
    timed_wait(box.handle);
    Tensor got = std::move(box.buffer);
    ++box.next;
    // This message proves the sends it answers arrived: free them before the next receive's
    // buffer is allocated.
    std::erase_if(sending, [&](Sending& s) {
      if (s.release != &box || s.at != i) return false;
      timed_wait(s.handle);
      return true;
    });
    post(box);  // the next one's receive, before this one's compute
    return got;
  };
  StageInbox activations, gradients;
  activations.peer = first ? -1 : stage_ - 1;
  activations.tag = pipeline_activation_tag;
  gradients.peer = last ? -1 : stage_ + 1;
  gradients.tag = pipeline_gradient_tag;
  post(activations);
  post(gradients);

  // Micro-batch i's activation goes to the next stage, whose reply is a gradient; its
  // gradient to the previous stage, whose reply is an activation.
  auto send = [&](Tensor t, int i, bool backward) {
    const int peer = backward ? stage_ - 1 : stage_ + 1;
    comm::Handle handle =
        pp.isend(t, peer, backward ? pipeline_gradient_tag(i) : pipeline_activation_tag(i));
    const int at = reply_after(stages, peer, m, i, backward);
    const StageInbox* reply = backward ? &activations : &gradients;
    sending.push_back({std::move(t), std::move(handle), at < 0 ? nullptr : reply, at});
  };

  double local = 0;
  for (const PipelineStep& step : one_f_one_b_order(stages, stage_, m)) {
    const int i = step.micro;
    if (!step.backward) {
      Tensor x = first ? Tensor() : take(activations, i);
      use_batch(i);
      local += driver_.stage_forward(i, layer0, layer_end, x).sum;
      if (!last) send(std::move(x), i, false);
    } else {
      Tensor dx = last ? Tensor() : take(gradients, i);
      use_batch(i);
      driver_.stage_backward(i, grad_scale, dx);
      if (!first) send(std::move(dx), i, true);
    }
  }
  ops_->set_batch(nullptr);
  for (Sending& s : sending) timed_wait(s.handle);  // those no reply answers this step
  sending.clear();
  comm::Handle all_done = pp.ibarrier();  // a stage done early idles until the last one is
  timed_wait(all_done);
  pipeline_wait_seconds_ = waited;
  pipeline_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  return local;
}

}  // namespace origami::parallel
