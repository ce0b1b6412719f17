#include "origami/comm/threads_transport.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::comm {

using Clock = std::chrono::steady_clock;

struct ThreadsWorld::Request {
  P2POp op;
  int self = 0;
  bool is_send = false;
  bool matched = false;
  std::weak_ptr<Transfer> transfer;  // weak: the transfer owns its requests, not the reverse
};

struct ThreadsWorld::Transfer {
  std::shared_ptr<Request> send, recv;
  std::int64_t offset = 0;
  Clock::time_point matched;
  Clock::time_point deadline;
  bool in_flight = false;  // the progress thread is copying a chunk outside the lock
  bool finished = false;   // both sides completed (or failed)
  bool cancelled = false;
  std::exception_ptr error;
};

struct ThreadsWorld::RankQueues {
  std::list<std::shared_ptr<Request>> unmatched_sends;  // sends addressed to this rank
  std::list<std::shared_ptr<Request>> unmatched_recvs;  // receives posted by this rank
  std::deque<std::shared_ptr<Transfer>> active;         // being copied by this rank's thread
  std::vector<std::shared_ptr<Transfer>> delayed;       // copied, held by the link model
  std::condition_variable cv;
};

namespace {

class ThreadsTransport final : public Transport {
 public:
  ThreadsTransport(std::shared_ptr<ThreadsWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}
  int world_rank() const override { return rank_; }
  int world_size() const override { return world_->size(); }
  std::string name() const override { return "threads"; }
  const LinkModel& link_model() const override { return world_->link(); }
  void post_send(P2POp op) override { world_->post(rank_, std::move(op), true); }
  void post_recv(P2POp op) override { world_->post(rank_, std::move(op), false); }
  bool aborted(std::string* why) const override { return world_->aborted(why); }

 private:
  std::shared_ptr<ThreadsWorld> world_;
  int rank_;
};

std::exception_ptr comm_error(const std::string& msg) { return std::make_exception_ptr(CommError(msg)); }

std::string finished_message(const detail::OpState& s, int peer_world) {
  return fmt::format("{} on rank {} of communicator '{}' can never complete: world rank {} (peer {}) has already "
                     "returned from its function -- a rank skipped or added a communication call",
                     s.describe(), s.core ? s.core->rank : -1, s.core ? s.core->name : std::string("?"), peer_world,
                     s.peer);
}

}  // namespace

std::shared_ptr<ThreadsWorld> ThreadsWorld::create(int size, LinkModel link, bool virtual_time) {
  ORIGAMI_CHECK(size >= 1, "a world needs at least one rank, got {}", size);
  link.validate();
  std::shared_ptr<ThreadsWorld> w(new ThreadsWorld(size, link, virtual_time));
  w->start();
  return w;
}

ThreadsWorld::ThreadsWorld(int size, LinkModel link, bool virtual_time)
    : size_(size), link_(link), virtual_time_(virtual_time), finished_(static_cast<std::size_t>(size), false) {
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<RankQueues>());
}

void ThreadsWorld::start() {
  for (int r = 0; r < size_; ++r) threads_.emplace_back([this, r] { progress_loop(r); });
}

ThreadsWorld::~ThreadsWorld() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  for (auto& q : ranks_) q->cv.notify_all();
  for (auto& t : threads_) t.join();
  // Anything still pending can never complete now.
  std::vector<Completion> done;
  {
    std::lock_guard lock(mutex_);
    auto e = comm_error("the threads world was shut down with the operation pending");
    for (auto& q : ranks_) {
      for (auto& r : q->unmatched_sends) done.emplace_back(r->op.state, e);
      for (auto& r : q->unmatched_recvs) done.emplace_back(r->op.state, e);
      for (auto& t : q->active) fail_transfer_locked(t, e, &done);
      for (auto& t : q->delayed) fail_transfer_locked(t, e, &done);
    }
  }
  flush(done);
}

std::shared_ptr<Transport> ThreadsWorld::transport(int world_rank) {
  ORIGAMI_CHECK(world_rank >= 0 && world_rank < size_, "world rank {} outside [0, {})", world_rank, size_);
  return std::make_shared<ThreadsTransport>(shared_from_this(), world_rank);
}

void ThreadsWorld::flush(std::vector<Completion>& done) {
  for (auto& [state, err] : done) state->complete(err);
  done.clear();
}

bool ThreadsWorld::aborted(std::string* why) const {
  std::lock_guard lock(mutex_);
  if (aborted_ && why) *why = abort_reason_;
  return aborted_;
}

void ThreadsWorld::fail_transfer_locked(const std::shared_ptr<Transfer>& t, std::exception_ptr e,
                                        std::vector<Completion>* out) {
  if (t->finished) return;
  if (!t->error) t->error = e;
  t->cancelled = true;
  if (t->in_flight) return;  // the progress thread fails it once its chunk is copied
  t->finished = true;
  out->emplace_back(t->send->op.state, t->error);
  out->emplace_back(t->recv->op.state, t->error);
  auto& q = *ranks_[t->recv->self];
  std::erase(q.active, t);
  std::erase(q.delayed, t);
}

void ThreadsWorld::abort(const std::string& why) {
  std::vector<Completion> done;
  {
    std::lock_guard lock(mutex_);
    if (!aborted_) {
      aborted_ = true;
      abort_reason_ = why;
    }
    auto e = comm_error(abort_reason_);
    for (auto& q : ranks_) {
      for (auto& r : q->unmatched_sends) done.emplace_back(r->op.state, e);
      for (auto& r : q->unmatched_recvs) done.emplace_back(r->op.state, e);
      q->unmatched_sends.clear();
      q->unmatched_recvs.clear();
      auto active = q->active;
      for (auto& t : active) fail_transfer_locked(t, e, &done);
      auto delayed = q->delayed;
      for (auto& t : delayed) fail_transfer_locked(t, e, &done);
    }
  }
  for (auto& q : ranks_) q->cv.notify_all();
  flush(done);
}

void ThreadsWorld::post(int self, P2POp op, bool is_send) {
  auto req = std::make_shared<Request>();
  req->op = std::move(op);
  req->self = self;
  req->is_send = is_send;
  std::weak_ptr<ThreadsWorld> weak = shared_from_this();
  std::weak_ptr<Request> weak_req = req;
  req->op.state->cancel = [weak, weak_req] {
    auto w = weak.lock();
    auto r = weak_req.lock();
    if (w && r) w->cancel(r);
  };

  std::vector<Completion> done;
  {
    std::lock_guard lock(mutex_);
    if (aborted_) {
      done.emplace_back(req->op.state, comm_error(abort_reason_));
    } else {
      const int receiver = is_send ? req->op.peer_world : self;
      const int sender = is_send ? self : req->op.peer_world;
      auto& q = *ranks_[receiver];
      auto& opposite = is_send ? q.unmatched_recvs : q.unmatched_sends;
      auto it = std::find_if(opposite.begin(), opposite.end(), [&](const std::shared_ptr<Request>& o) {
        return o->op.comm == req->op.comm && o->op.tag == req->op.tag &&
               (is_send ? o->op.peer_world == sender : o->self == sender);
      });
      if (it == opposite.end() && finished_[static_cast<std::size_t>(req->op.peer_world)]) {
        done.emplace_back(req->op.state, comm_error(finished_message(*req->op.state, req->op.peer_world)));
      } else if (it == opposite.end()) {
        (is_send ? q.unmatched_sends : q.unmatched_recvs).push_back(req);
      } else {
        auto other = *it;
        opposite.erase(it);
        auto t = std::make_shared<Transfer>();
        t->send = is_send ? req : other;
        t->recv = is_send ? other : req;
        t->matched = Clock::now();
        t->send->transfer = t;
        t->recv->transfer = t;
        t->send->matched = true;
        t->recv->matched = true;
        const auto& s = t->send->op;
        const auto& r = t->recv->op;
        if (s.bytes != r.bytes) {
          // The same call with different sizes on two ranks: report it on both sides.
          auto e = comm_error(fmt::format(
              "mismatched message: rank {} sends {} B for {} (seq {}, tag {}) but rank {} expects {} B "
              "for {} (seq {}) -- the ranks called the operation with different counts or dtypes",
              s.state->core ? s.state->core->rank : sender, s.bytes, s.state->op, s.state->seq, s.tag,
              r.state->core ? r.state->core->rank : receiver, r.bytes, r.state->op, r.state->seq));
          t->finished = true;
          done.emplace_back(s.state, e);
          done.emplace_back(r.state, e);
        } else if (virtual_time_) {
          // Dry run: complete now at the virtual time the link model gives the hop.
          const double done_s = std::max(0.0, s.state->virtual_post_s) +
                                link_.hop_seconds(sender, receiver, s.state->accounted);
          if (s.bytes > 0 && r.recv_data != nullptr && s.send_data != nullptr)
            std::memcpy(r.recv_data, s.send_data, static_cast<std::size_t>(s.bytes));
          t->offset = s.bytes;
          t->finished = true;
          s.state->virtual_done_s = done_s;
          r.state->virtual_done_s = done_s;
          done.emplace_back(s.state, nullptr);
          done.emplace_back(r.state, nullptr);
        } else if (s.bytes <= kInlineBytes && !link_.enabled) {
          // Small message: the posting thread copies it now (a few hundred nanoseconds under
          // the lock) instead of waking the receiver's progress thread for it.
          if (s.bytes > 0) std::memcpy(r.recv_data, s.send_data, static_cast<std::size_t>(s.bytes));
          t->offset = s.bytes;
          t->finished = true;
          done.emplace_back(s.state, nullptr);
          done.emplace_back(r.state, nullptr);
        } else {
          q.active.push_back(t);
          q.cv.notify_one();
        }
      }
    }
  }
  flush(done);
}

void ThreadsWorld::rank_finished(int rank) {
  std::vector<Completion> done;
  {
    std::lock_guard lock(mutex_);
    finished_[static_cast<std::size_t>(rank)] = true;
    for (int q = 0; q < size_; ++q) {
      auto& rq = *ranks_[static_cast<std::size_t>(q)];
      // Receives posted by others from `rank`, and sends others addressed to `rank`.
      auto fail_if = [&](std::list<std::shared_ptr<Request>>& l, auto pred) {
        for (auto it = l.begin(); it != l.end();) {
          if (pred(**it)) {
            done.emplace_back((*it)->op.state, comm_error(finished_message(*(*it)->op.state, rank)));
            it = l.erase(it);
          } else {
            ++it;
          }
        }
      };
      fail_if(rq.unmatched_recvs, [&](const Request& r) { return r.op.peer_world == rank && r.self != rank; });
      if (q == rank) fail_if(rq.unmatched_sends, [&](const Request& r) { return r.self != rank; });
    }
  }
  flush(done);
}

void ThreadsWorld::cancel(const std::shared_ptr<Request>& req) {
  std::vector<Completion> done;
  {
    std::unique_lock lock(mutex_);
    if (req->op.state->is_done()) return;
    auto e = comm_error(fmt::format("{} was cancelled by its rank", req->op.state->describe()));
    if (!req->matched) {
      const int receiver = req->is_send ? req->op.peer_world : req->self;
      auto& q = *ranks_[receiver];
      std::erase(q.unmatched_sends, req);
      std::erase(q.unmatched_recvs, req);
      done.emplace_back(req->op.state, e);
    } else if (auto t = req->transfer.lock()) {
      t->cancelled = true;
      if (!t->error) t->error = e;
      // The buffer may be freed once we return: wait out a chunk being copied.
      chunk_cv_.wait(lock, [&] { return !t->in_flight; });
      fail_transfer_locked(t, t->error, &done);
    }
  }
  flush(done);
}

void ThreadsWorld::progress_loop(int rank) {
  auto& q = *ranks_[rank];
  std::vector<Completion> done;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // Release transfers whose link-model time has passed.
    const auto now = Clock::now();
    for (auto it = q.delayed.begin(); it != q.delayed.end();) {
      auto& t = *it;
      if (t->deadline <= now) {
        t->finished = true;
        done.emplace_back(t->send->op.state, nullptr);
        done.emplace_back(t->recv->op.state, nullptr);
        it = q.delayed.erase(it);
      } else {
        ++it;
      }
    }
    if (!done.empty()) {
      lock.unlock();
      flush(done);
      lock.lock();
      continue;
    }
    if (!q.active.empty()) {
      auto t = q.active.front();
      q.active.pop_front();
      const std::int64_t n = std::min(kChunkBytes, t->send->op.bytes - t->offset);
      t->in_flight = true;
      lock.unlock();
      if (n > 0) {
        std::memcpy(static_cast<char*>(t->recv->op.recv_data) + t->offset,
                    static_cast<const char*>(t->send->op.send_data) + t->offset, static_cast<std::size_t>(n));
      }
      lock.lock();
      t->in_flight = false;
      t->offset += n;
      chunk_cv_.notify_all();
      if (t->cancelled) {
        fail_transfer_locked(t, t->error, &done);
      } else if (t->offset < t->send->op.bytes) {
        q.active.push_back(t);  // round robin: the next transfer gets the next chunk
      } else {
        t->deadline = t->matched + link_.hop_time(t->send->self, t->recv->self, t->send->op.bytes);
        if (t->deadline <= Clock::now()) {
          t->finished = true;
          done.emplace_back(t->send->op.state, nullptr);
          done.emplace_back(t->recv->op.state, nullptr);
        } else {
          q.delayed.push_back(t);
        }
      }
      if (!done.empty()) {
        lock.unlock();
        flush(done);
        lock.lock();
      }
      continue;
    }
    if (q.delayed.empty()) {
      q.cv.wait(lock);
    } else {
      auto next = q.delayed.front()->deadline;
      for (auto& t : q.delayed) next = std::min(next, t->deadline);
      q.cv.wait_until(lock, next);
    }
  }
}

}  // namespace origami::comm
