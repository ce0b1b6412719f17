#include "origami/comm/comm_impl.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"

namespace origami::comm::detail {

CommImpl::CommImpl(std::shared_ptr<CommCore> c, std::shared_ptr<Transport> t, MemoryTracker& tr,
                   std::uint64_t i, std::vector<int> w)
    : core(std::move(c)), transport(std::move(t)), tracker(&tr), id(i), world_ranks(std::move(w)) {}

CommImpl::~CommImpl() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CommImpl::worker_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, queue drained
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

Handle CommImpl::submit(const std::string& kind, std::int64_t bytes, std::function<void(CollectiveContext&)> fn,
                        bool fp32_data) {
  const std::int64_t seq = collective_seq++;
  auto state = make_state(core, kind, "collective", -1, seq, bytes);
  state->accounted = dryrun::comm_bytes(fp32_data, bytes);
  // The issuer's clock (copied: the collective runs later, on the worker).
  std::optional<dryrun::Clock> issuer;
  if (const dryrun::Clock* c = dryrun::current()) {
    issuer.emplace();
    issuer->flop_rate = c->flop_rate;
    issuer->now_s = c->now_s;
    issuer->comm_elem_bytes = c->comm_elem_bytes;
    state->virtual_post_s = c->now_s;
  }
  core->stats.add_call(kind);
  core->log->add({std::chrono::steady_clock::now(), core->name, kind, "issue", seq, bytes, -1});
  auto task = [this, state, kind, seq, fp32_data, issuer, fn = std::move(fn)] {
    std::exception_ptr poisoned;
    {
      std::lock_guard lock(mutex_);
      poisoned = poisoned_;
    }
    if (poisoned) {
      std::string why = "unknown failure";
      try {
        std::rethrow_exception(poisoned);
      } catch (const std::exception& e) {
        why = e.what();
      }
      state->complete(std::make_exception_ptr(CommError(fmt::format(
          "{} on rank {} of communicator '{}' was not run: an earlier collective failed: {}", kind,
          core->rank, core->name, why))));
      return;
    }
    try {
      CollectiveContext ctx(*this, kind, seq, fp32_data);
      if (issuer) {
        stream_.flop_rate = issuer->flop_rate;
        stream_.comm_elem_bytes = issuer->comm_elem_bytes;
        stream_.now_s = std::max(issuer->now_s, stream_.now_s);
        {
          const dryrun::Install on_worker(&stream_);
          fn(ctx);
        }
        state->virtual_done_s = stream_.now_s;
      } else {
        fn(ctx);
      }
      state->complete();
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        poisoned_ = std::current_exception();
      }
      state->complete(std::current_exception());
    }
  };
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
    if (!started_) {
      started_ = true;
      worker_ = std::thread([this] { worker_loop(); });
    }
  }
  cv_.notify_one();
  return Handle(state);
}

Handle CommImpl::post(bool is_send, const std::string& kind, const void* data, std::int64_t bytes, int peer,
                      std::int64_t tag, std::int64_t seq, bool user_facing, bool fp32_data) {
  auto state = make_state(core, kind, is_send ? "send" : "recv", peer, seq, bytes);
  state->user_facing = user_facing;
  state->accounted = dryrun::comm_bytes(fp32_data, bytes);
  if (dryrun::Clock* c = dryrun::current()) {
    state->virtual_post_s = c->now_s;
    if (is_send) {
      // The hop starts when this stream's link to the peer has carried its earlier messages;
      // it then holds the link for bytes / beta (the latency alpha overlaps the next message).
      const int src = world_ranks[static_cast<std::size_t>(core->rank)];
      const int dst = world_ranks[static_cast<std::size_t>(peer)];
      const LinkModel& link = transport->link_model();
      double& free = c->link_free_s[dst];
      state->virtual_post_s = std::max(c->now_s, free);
      free = state->virtual_post_s + link.hop_seconds(src, dst, state->accounted) -
             link.hop_seconds(src, dst, 0);
    }
  }
  if (user_facing) core->stats.add_call(kind);
  core->log->add({std::chrono::steady_clock::now(), core->name, kind, is_send ? "post send" : "post recv", seq,
                  bytes, peer});
  P2POp op;
  op.comm = id;
  op.peer_world = world_ranks[static_cast<std::size_t>(peer)];
  op.peer_group = peer;
  op.tag = tag;
  op.bytes = bytes;
  op.state = state;
  if (is_send) {
    op.send_data = data;
    transport->post_send(std::move(op));
  } else {
    op.recv_data = const_cast<void*>(data);
    transport->post_recv(std::move(op));
  }
  return Handle(state);
}

// --- CollectiveContext

int CollectiveContext::rank() const { return comm_.core->rank; }
int CollectiveContext::size() const { return comm_.core->size; }

Handle CollectiveContext::send(const void* data, std::int64_t bytes, int peer) {
  return comm_.post(true, kind_, data, bytes, peer, kCollectiveTagBase + seq_ % kCollectiveTagBase, seq_, false,
                    fp32_data_);
}

Handle CollectiveContext::recv(void* data, std::int64_t bytes, int peer) {
  return comm_.post(false, kind_, data, bytes, peer, kCollectiveTagBase + seq_ % kCollectiveTagBase, seq_, false,
                    fp32_data_);
}

void CollectiveContext::wait(Handle& h) {
  if (h.state_) h.state_->wait_for_completion(comm_.core->timeout_s);
}

void CollectiveContext::wait_all(std::vector<Handle>& hs) {
  for (auto& h : hs) wait(h);
}

Tensor CollectiveContext::staging(std::int64_t bytes) {
  ORIGAMI_CHECK(bytes % 2 == 0, "staging of an odd byte count {}", bytes);
  if (fp32_data_ && bytes % 4 == 0) return Tensor(*comm_.tracker, MemCategory::CommBuffers, DType::F32, {bytes / 4});
  return Tensor(*comm_.tracker, MemCategory::CommBuffers, DType::BF16, {bytes / 2});
}

}  // namespace origami::comm::detail
