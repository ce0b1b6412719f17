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
// micro-batch ahead of its use, so the neighbour's message lands while this stage computes;
// sends complete in the background and are waited for before the step's reductions. Every
// wait is bounded by the communicator's timeout (communicator.h). The time blocked in those
// receives and in a closing pp barrier is the stage's measured bubble.
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
  auto take = [&](StageInbox& box, int i) {
    ORIGAMI_CHECK(box.next == i, "stage {} expected micro-batch {}'s message, schedule is at {}",
                  stage_, box.next, i);
    timed_wait(box.handle);
    Tensor got = std::move(box.buffer);
    ++box.next;
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

  struct Sending {
    Tensor buffer;
    comm::Handle handle;
  };
  std::vector<Sending> sending;
  auto send = [&](Tensor t, int peer, int tag) {
    std::erase_if(sending, [](Sending& s) { return s.handle.test(); });  // free what arrived
    comm::Handle handle = pp.isend(t, peer, tag);
    sending.push_back({std::move(t), std::move(handle)});
  };

  double local = 0;
  for (const PipelineStep& step : one_f_one_b_order(stages, stage_, m)) {
    const int i = step.micro;
    if (!step.backward) {
      Tensor x = first ? Tensor() : take(activations, i);
      use_batch(i);
      local += driver_.stage_forward(i, layer0, layer_end, x).sum;
      if (!last) send(std::move(x), stage_ + 1, pipeline_activation_tag(i));
    } else {
      Tensor dx = last ? Tensor() : take(gradients, i);
      use_batch(i);
      driver_.stage_backward(i, grad_scale, dx);
      if (!first) send(std::move(dx), stage_ - 1, pipeline_gradient_tag(i));
    }
  }
  ops_->set_batch(nullptr);
  for (Sending& s : sending) timed_wait(s.handle);
  comm::Handle all_done = pp.ibarrier();  // a stage done early idles until the last one is
  timed_wait(all_done);
  pipeline_wait_seconds_ = waited;
  pipeline_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  return local;
}

}  // namespace origami::parallel
