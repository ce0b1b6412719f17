#include "origami/comm/handle.h"

#include <fmt/format.h>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"

namespace origami::comm {

namespace detail {

using Clock = std::chrono::steady_clock;

std::shared_ptr<OpState> make_state(std::shared_ptr<CommCore> core, std::string op, std::string what,
                                    int peer, std::int64_t seq, std::int64_t bytes) {
  auto s = std::make_shared<OpState>();
  s->core = std::move(core);
  s->op = std::move(op);
  s->what = std::move(what);
  s->peer = peer;
  s->seq = seq;
  s->bytes = bytes;
  s->accounted = bytes;
  s->collective = s->what == "collective";
  return s;
}

void OpState::complete(std::exception_ptr e) {
  std::vector<std::function<void()>> conts;
  {
    std::lock_guard lock(m);
    if (done) return;
    // Account before waking anyone: a caller reading stats right after wait() sees the bytes.
    if (!e && core) {
      if (what == "send") core->stats.add_sent(op, accounted);
      if (what == "recv") core->stats.add_received(op, accounted);
      // In a dry run an operation lasts from its virtual post to its virtual completion.
      const double took = virtual_done_s >= 0 && virtual_post_s >= 0
                              ? virtual_done_s - virtual_post_s
                              : std::chrono::duration<double>(Clock::now() - issued).count();
      if (user_facing) core->stats.add_time(op, took);
    }
    if (core && core->log) {
      core->log->add({Clock::now(), core->name, op, e ? "failed" : "done " + what, seq, bytes, peer});
    }
    done = true;
    error = e;
    conts.swap(continuations);
  }
  for (auto& f : conts) f();
  {
    std::lock_guard lock(m);
    settled = true;
  }
  cv.notify_all();
}

bool OpState::is_done() {
  std::lock_guard lock(m);
  return settled;
}

std::string OpState::describe() const {
  if (collective) return fmt::format("{} (collective, seq {}, {} B)", op, seq, bytes);
  return fmt::format("{} ({} {} {}, seq {}, {} B)", op, what, what == "send" ? "to" : "from",
                     peer_name(), seq, bytes);
}

std::string OpState::peer_name() const {
  // The communicator-local rank alone misleads: "peer 0 of 'tp'" may be world rank 2.
  if (core && peer >= 0 && static_cast<std::size_t>(peer) < core->world_ranks.size())
    return fmt::format("peer {} of '{}' (world rank {})", peer, core->name,
                       core->world_ranks[static_cast<std::size_t>(peer)]);
  return fmt::format("peer {}", peer);
}

void OpState::wait_for_completion(double timeout_s) {
  std::unique_lock lock(m);
  if (!collective) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    while (!settled) {
      if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !settled) {
        lock.unlock();
        if (cancel) cancel();
        lock.lock();
        if (settled && !error) break;  // completed while we were cancelling
        const std::string who = core ? fmt::format("rank {} of communicator '{}' (world rank {})", core->rank,
                                                   core->name, core->world_rank)
                                     : std::string("a rank");
        const std::string log = core && core->log ? core->log->dump() : std::string();
        throw CommError(fmt::format(
            "communication timeout after {:.3g} s: {} waited in {} and {} never matched it (the "
            "peer may be stalled, dead, or calling a different operation; set the timeout with "
            "Communicator::set_timeout or ORIGAMI_COMM_TIMEOUT_S). Recent operations on rank {}:\n{}",
            timeout_s, who, describe(), peer_name(), core ? core->rank : -1, log));
      }
    }
  } else {
    // A collective's steps are each bounded by the timeout on the worker, so its completion
    // is guaranteed; waiting here without a deadline reports the step that failed instead.
    cv.wait(lock, [&] { return settled; });
  }
  if (error) std::rethrow_exception(error);
  dryrun::join(virtual_done_s);  // the waiter's virtual clock cannot be earlier than completion
}

}  // namespace detail

bool Event::ready() const { return !state_ || state_->is_done(); }

void Event::then(std::function<void()> fn) const {
  if (!state_) {
    fn();
    return;
  }
  {
    std::lock_guard lock(state_->m);
    if (!state_->done) {
      state_->continuations.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    release();
    state_ = std::move(o.state_);
  }
  return *this;
}

Handle::~Handle() { release(); }

void Handle::release() noexcept {
  if (!state_) return;
  auto s = std::move(state_);
  if (s->is_done()) return;
  try {
    if (!s->collective && s->cancel) {
      s->cancel();
    } else {
      std::unique_lock lock(s->m);
      s->cv.wait(lock, [&] { return s->settled; });
    }
  } catch (...) {
    // A destructor must not throw; the operation is withdrawn either way.
  }
}

bool Handle::test() {
  if (!state_) return true;
  std::lock_guard lock(state_->m);
  if (state_->settled && state_->error) std::rethrow_exception(state_->error);
  if (state_->settled) dryrun::join(state_->virtual_done_s);
  return state_->settled;
}

void Handle::wait() {
  if (!state_) return;
  const auto t0 = std::chrono::steady_clock::now();
  // In a dry run the exposed time is virtual: how far the wait moved the waiter's clock.
  const dryrun::Clock* clock = dryrun::current();
  const double virtual_t0 = clock != nullptr ? clock->now_s : 0;
  auto account = [&] {
    if (!state_->core) return;
    const double exposed =
        clock != nullptr ? clock->now_s - virtual_t0
                         : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state_->core->stats.add_exposed(state_->op, exposed);
  };
  try {
    state_->wait_for_completion(state_->core ? state_->core->timeout_s.load() : 120.0);
  } catch (...) {
    account();
    throw;
  }
  account();
}

Handle& Handle::then(std::function<void()> fn) {
  event().then(std::move(fn));
  return *this;
}

void wait_all(std::vector<Handle>& handles) {
  std::exception_ptr first;
  for (auto& h : handles) {
    try {
      h.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace origami::comm
