#include "origami/comm/mpi_transport.h"

// The C API only (Open MPI would otherwise pull in its deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::comm {

using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kPollWindow = std::chrono::milliseconds(20);
// A large message moves in fragments that need progress calls on both sides: keep polling
// for as long as the outstanding bytes could take at this rate before backing off.
constexpr double kPollBytesPerSecond = 0.5e9;
constexpr auto kMinSleep = std::chrono::microseconds(20);
constexpr auto kMaxSleep = std::chrono::microseconds(200);

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<std::size_t>(len));
}
}  // namespace

class MpiFunnel final : public Transport, public std::enable_shared_from_this<MpiFunnel> {
 public:
  explicit MpiFunnel(LinkModel link) : link_(link) {}

  void start() {
    std::promise<void> ready;
    auto fut = ready.get_future();
    thread_ = std::thread([this, &ready] { run(ready); });
    fut.get();  // rethrows an initialisation failure
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  int world_rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  const LinkModel& link_model() const override { return link_; }

  void set_link(const LinkModel& l) {
    l.validate();
    command([this, l] { link_ = l; }, true);
  }

  void post_send(P2POp op) override { post(std::move(op), false); }
  void post_recv(P2POp op) override { post(std::move(op), true); }

  void create_group(std::uint64_t parent, std::uint64_t child, int color, int key) override {
    command([this, parent, child, color, key] {
      MPI_Comm nc = MPI_COMM_NULL;
      const int rc = MPI_Comm_split(comms_.at(parent), color, key, &nc);
      if (rc != MPI_SUCCESS) throw CommError("MPI_Comm_split failed: " + mpi_error_string(rc));
      MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
      comms_[child] = nc;
    }, true);
  }

  [[noreturn]] void abort_job(int code) {
    command([code] { MPI_Abort(MPI_COMM_WORLD, code); }, false);
    // If the funnel is stuck inside MPI, leaving without finalising still makes mpirun end
    // the job.
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(code);
  }

 private:
  // One message, moved as chunks of at most kChunkBytes (each its own MPI message, same
  // tag, matched in order). A send keeps at most kSendWindow chunks in flight, so a small
  // message posted later on another tag is not queued behind every fragment of a large one.
  struct Group {
    P2POp op;
    bool is_recv = false;
    int nchunks = 1;
    int next = 0;       // next chunk to post
    int remaining = 1;  // chunks not yet retired (or never to be posted)
    std::exception_ptr error;
    Clock::time_point posted;
    std::shared_ptr<std::promise<void>> cancel_waiter;  // set once everything is retired
  };
  using SendKey = std::tuple<std::uint64_t, int, std::int64_t>;  // comm, peer, tag
  struct Entry {
    std::shared_ptr<Group> group;
    int chunk = 0;
  };
  struct Delayed {
    Clock::time_point deadline;
    std::shared_ptr<detail::OpState> state;
  };

  static constexpr std::int64_t kChunkBytes = 1 << 20;
  static constexpr int kSendWindow = 2;

  // Queues fn for the funnel; with wait, blocks until it ran (rethrowing its failure).
  void command(std::function<void()> fn, bool wait) {
    auto done = std::make_shared<std::promise<void>>();
    auto fut = done->get_future();
    {
      std::lock_guard lock(mutex_);
      commands_.push_back([fn = std::move(fn), done] {
        try {
          fn();
          done->set_value();
        } catch (...) {
          done->set_exception(std::current_exception());
        }
      });
    }
    cv_.notify_all();
    if (wait) fut.get();
  }

  void post(P2POp op, bool is_recv) {
    auto state = op.state;
    std::weak_ptr<MpiFunnel> weak = shared_from_this();
    state->cancel = [weak, s = state.get()] {
      if (auto f = weak.lock()) f->cancel(s);
    };
    auto g = std::make_shared<Group>();
    g->is_recv = is_recv;
    g->nchunks = static_cast<int>(std::max<std::int64_t>(1, (op.bytes + kChunkBytes - 1) / kChunkBytes));
    g->remaining = g->nchunks;
    g->posted = Clock::now();
    g->op = std::move(op);
    command([this, g] {
      if (comms_.find(g->op.comm) == comms_.end()) {
        g->op.state->complete(std::make_exception_ptr(
            CommError(fmt::format("{}: the MPI transport does not know this communicator", g->op.state->describe()))));
        return;
      }
      if (g->is_recv) {
        for (int k = 0; k < g->nchunks; ++k) post_chunk(g, k);
        g->next = g->nchunks;
      } else {
        auto& q = send_queues_[key_of(*g)];
        q.push_back(g);
        if (q.size() == 1) pump(g);
      }
    }, false);
  }

  static SendKey key_of(const Group& g) { return {g.op.comm, g.op.peer_group, g.op.tag}; }
  std::int64_t chunk_len(const Group& g, int k) const {
    return std::min(kChunkBytes, g.op.bytes - static_cast<std::int64_t>(k) * kChunkBytes);
  }

  void post_chunk(const std::shared_ptr<Group>& g, int k) {
    MPI_Request req = MPI_REQUEST_NULL;
    const std::int64_t off = static_cast<std::int64_t>(k) * kChunkBytes;
    const int len = static_cast<int>(chunk_len(*g, k));
    const int tag = static_cast<int>(g->op.tag);
    MPI_Comm comm = comms_.at(g->op.comm);
    const int rc = g->is_recv ? MPI_Irecv(static_cast<char*>(g->op.recv_data) + off, len, MPI_BYTE,
                                          g->op.peer_group, tag, comm, &req)
                              : MPI_Isend(static_cast<const char*>(g->op.send_data) + off, len, MPI_BYTE,
                                          g->op.peer_group, tag, comm, &req);
    if (rc != MPI_SUCCESS) {
      if (!g->error) {
        g->error = std::make_exception_ptr(
            CommError(fmt::format("{}: MPI refused the post: {}", g->op.state->describe(), mpi_error_string(rc))));
      }
      chunk_retired(g);
      return;
    }
    reqs_.push_back(req);
    entries_.push_back(Entry{g, k});
  }

  // Posts the next chunks of the send at the head of its (comm, peer, tag) queue; once all
  // are posted, the next message on that key may start (messages on one key stay in order).
  void pump(std::shared_ptr<Group> g) {
    while (g) {
      while (g->next < g->nchunks && !g->error && g->next - (g->nchunks - g->remaining) < kSendWindow) {
        post_chunk(g, g->next++);
      }
      if (g->next < g->nchunks && !g->error) return;  // more to post as chunks retire
      // Fully posted (or failed): the next message on this key may start.
      abandon_unposted(g);
      auto it = send_queues_.find(key_of(*g));
      if (it == send_queues_.end() || it->second.empty() || it->second.front() != g) return;
      it->second.pop_front();
      if (it->second.empty()) {
        send_queues_.erase(it);
        return;
      }
      g = it->second.front();
    }
  }

  // Chunks that will never be posted count as retired.
  void abandon_unposted(const std::shared_ptr<Group>& g) {
    if (g->next >= g->nchunks) return;
    const int never = g->nchunks - g->next;
    g->next = g->nchunks;
    g->remaining -= never - 1;
    chunk_retired(g);
  }

  void chunk_retired(const std::shared_ptr<Group>& g) {
    g->remaining -= 1;
    if (g->remaining > 0) return;
    if (g->cancel_waiter) g->cancel_waiter->set_value();
    const auto deadline = g->posted + link_.hop_time(rank_, g->op.peer_world, g->op.bytes);
    if (!g->error && deadline > Clock::now()) {
      delayed_.push_back({deadline, g->op.state});
    } else {
      g->op.state->complete(g->error);
    }
  }

  // Withdraws a message; returns once MPI no longer uses its buffer (or after 2 s for a send
  // MPI cannot cancel -- an error path: the job is about to fail anyway).
  void cancel(detail::OpState* s) {
    auto retired = std::make_shared<std::promise<void>>();
    auto fut = retired->get_future();
    command([this, s, retired] {
      std::shared_ptr<Group> g;
      for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].group->op.state.get() == s) {
          g = entries_[i].group;
          MPI_Cancel(&reqs_[i]);
        }
      }
      if (!g) {
        // Maybe queued behind another send on its key and not started.
        for (auto& [key, q] : send_queues_) {
          for (auto& x : q) {
            if (x->op.state.get() == s) g = x;
          }
        }
      }
      if (!g || g->remaining == 0) {
        retired->set_value();
        return;
      }
      if (!g->error) {
        g->error = std::make_exception_ptr(CommError(fmt::format("{} was cancelled by its rank", s->describe())));
      }
      g->cancel_waiter = retired;
      if (!g->is_recv) {
        auto it = send_queues_.find(key_of(*g));
        const bool head = it != send_queues_.end() && !it->second.empty() && it->second.front() == g;
        if (head) {
          pump(g);  // stops posting (error set) and starts the next message on the key
        } else if (it != send_queues_.end()) {
          std::erase(it->second, g);
          abandon_unposted(g);
        }
      }
    }, false);
    fut.wait_for(std::chrono::seconds(2));
  }

  void retire(std::size_t i, const MPI_Status& st, int err) {
    Entry e = std::move(entries_[i]);
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
    reqs_.erase(reqs_.begin() + static_cast<std::ptrdiff_t>(i));
    auto& g = e.group;
    const auto& op = g->op;
    const std::int64_t expected = chunk_len(*g, e.chunk);
    std::exception_ptr error;
    int cancelled = 0;
    if (err == MPI_SUCCESS) MPI_Test_cancelled(&st, &cancelled);
    auto mismatch = [&](const std::string& got) {
      return std::make_exception_ptr(CommError(fmt::format(
          "mismatched message: rank {} expected {} B for {} from peer {} but {} -- the ranks called the operation "
          "with different counts or dtypes",
          op.state->core ? op.state->core->rank : rank_, op.bytes, op.state->describe(), op.peer_group, got)));
    };
    if (cancelled) {
      error = std::make_exception_ptr(CommError(fmt::format("{} was cancelled by its rank", op.state->describe())));
    } else if (err == MPI_ERR_TRUNCATE) {
      error = mismatch("a larger message arrived");
    } else if (err != MPI_SUCCESS) {
      error = std::make_exception_ptr(CommError(fmt::format("{} failed in MPI: {}", op.state->describe(), mpi_error_string(err))));
    } else if (g->is_recv) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      if (count != expected) {
        const std::int64_t got = static_cast<std::int64_t>(e.chunk) * kChunkBytes + count;
        error = mismatch(fmt::format("received {} B", got));
      }
    }
    if (error && !g->error) g->error = error;
    chunk_retired(g);
    if (!g->is_recv) pump(g);
  }

  void run(std::promise<void>& ready) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS ||
        provided < MPI_THREAD_FUNNELED) {
      ready.set_exception(std::make_exception_ptr(CommError("MPI_Init_thread did not provide MPI_THREAD_FUNNELED")));
      return;
    }
    MPI_Comm world = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    comms_[1] = world;  // the id Communicator::world uses
    MPI_Comm_rank(world, &rank_);
    MPI_Comm_size(world, &size_);
    ready.set_value();

    auto last_activity = Clock::now();
    auto sleep = kMinSleep;
    std::vector<int> indices;
    std::vector<MPI_Status> statuses;
    while (true) {
      std::deque<std::function<void()>> queued;
      bool stopping = false;
      {
        std::lock_guard lock(mutex_);
        queued.swap(commands_);
        stopping = stop_;
      }
      bool progressed = !queued.empty();
      for (auto& f : queued) f();
      if (!reqs_.empty()) {
        indices.resize(reqs_.size());
        statuses.resize(reqs_.size());
        int outcount = 0;
        const int rc = MPI_Testsome(static_cast<int>(reqs_.size()), reqs_.data(), &outcount, indices.data(),
                                    statuses.data());
        if (outcount > 0 && outcount != MPI_UNDEFINED) {
          progressed = true;
          // Retire from the back so earlier indices stay valid.
          std::vector<std::pair<int, int>> done;
          for (int k = 0; k < outcount; ++k) done.emplace_back(indices[k], k);
          std::sort(done.begin(), done.end(), std::greater<>());
          for (auto [i, k] : done) {
            retire(static_cast<std::size_t>(i), statuses[k],
                   rc == MPI_ERR_IN_STATUS ? statuses[k].MPI_ERROR : MPI_SUCCESS);
          }
        }
      }
      const auto now = Clock::now();
      for (auto it = delayed_.begin(); it != delayed_.end();) {
        if (it->deadline <= now) {
          it->state->complete();
          it = delayed_.erase(it);
          progressed = true;
        } else {
          ++it;
        }
      }
      if (stopping && reqs_.empty() && send_queues_.empty()) break;
      if (stopping) {
        // Requests nobody will complete (a receive whose sender is gone, a dropped handle):
        // cancel them after a grace period so MPI_Finalize is reached; give up after a longer one.
        if (stop_seen_ == Clock::time_point{}) stop_seen_ = Clock::now();
        const auto waited = Clock::now() - stop_seen_;
        if (waited > std::chrono::seconds(1) && !cancelled_at_stop_) {
          cancelled_at_stop_ = true;
          for (auto& r : reqs_) MPI_Cancel(&r);
        }
        if (waited > std::chrono::seconds(3)) {
          auto e = std::make_exception_ptr(CommError("the MPI runtime shut down with the operation pending"));
          for (auto& en : entries_) en.group->op.state->complete(e);
          for (auto& [key, q] : send_queues_) {
            for (auto& g : q) g->op.state->complete(e);
          }
          send_queues_.clear();
          for (auto& r : reqs_) MPI_Request_free(&r);
          reqs_.clear();
          entries_.clear();
          break;
        }
      }
      if (progressed) {
        last_activity = Clock::now();
        sleep = kMinSleep;
        continue;
      }
      std::unique_lock lock(mutex_);
      if (!commands_.empty() || stop_ != stopping) continue;
      if (!reqs_.empty()) {
        std::int64_t outstanding = 0;
        for (const auto& e : entries_) outstanding += chunk_len(*e.group, e.chunk);
        const auto window = kPollWindow + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                              static_cast<double>(outstanding) / kPollBytesPerSecond));
        if (Clock::now() - last_activity < window) {
          lock.unlock();
          std::this_thread::yield();
        } else {
          cv_.wait_for(lock, sleep);
          sleep = std::min<std::chrono::microseconds>(sleep * 2, kMaxSleep);
        }
      } else if (!delayed_.empty()) {
        auto next = delayed_.front().deadline;
        for (auto& d : delayed_) next = std::min(next, d.deadline);
        cv_.wait_until(lock, next);
      } else {
        cv_.wait(lock);
      }
    }
    for (auto& d : delayed_) d.state->complete();
    delayed_.clear();
    for (auto& [id, c] : comms_) MPI_Comm_free(&c);
    comms_.clear();
    MPI_Finalize();
  }

  LinkModel link_;
  int rank_ = 0;
  int size_ = 1;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> commands_;
  bool stop_ = false;
  // Owned by the funnel thread.
  std::map<std::uint64_t, MPI_Comm> comms_;
  std::vector<MPI_Request> reqs_;
  std::vector<Entry> entries_;
  std::map<SendKey, std::deque<std::shared_ptr<Group>>> send_queues_;
  std::vector<Delayed> delayed_;
  Clock::time_point stop_seen_{};
  bool cancelled_at_stop_ = false;
};

MpiRuntime::MpiRuntime(LinkModel link) {
  link.validate();
  funnel_ = std::make_shared<MpiFunnel>(link);
  funnel_->start();
}

MpiRuntime::~MpiRuntime() { funnel_->stop(); }

int MpiRuntime::rank() const { return funnel_->world_rank(); }
int MpiRuntime::size() const { return funnel_->world_size(); }
Communicator MpiRuntime::world(MemoryTracker& tracker) { return Communicator::world(funnel_, tracker); }
void MpiRuntime::set_link_model(const LinkModel& link) { funnel_->set_link(link); }

void MpiRuntime::abort(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  funnel_->abort_job(code);
}

int mpi_main(const std::function<int(Communicator&)>& fn, LinkModel link) {
  MpiRuntime rt(link);
  int rc = 0;
  std::string failure;
  int failure_code = 1;
  {
    MemoryTracker tracker(fmt::format("rank {}", rt.rank()));
    try {
      Communicator world = rt.world(tracker);
      rc = fn(world);
    } catch (const ConfigError& e) {
      // Bad input: the job ends with the command line's code for it (2), as on one process.
      failure = fmt::format("origami: rank {}: error: {}", rt.rank(), e.what());
      failure_code = 2;
    } catch (const std::exception& e) {
      failure = fmt::format("origami: rank {} failed: {}", rt.rank(), e.what());
    } catch (...) {
      failure = fmt::format("origami: rank {} failed with an unknown exception", rt.rank());
    }
  }
  if (!failure.empty()) rt.abort(failure_code, failure);
  return rc;
}

}  // namespace origami::comm
