#include "origami/comm/mpi_transport.h"

// The C API only (Open MPI would otherwise pull in its deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
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
  struct Entry {
    P2POp op;
    bool is_recv = false;
    Clock::time_point posted;
    std::vector<std::shared_ptr<std::promise<void>>> retire_waiters;
  };
  struct Delayed {
    Clock::time_point deadline;
    std::shared_ptr<detail::OpState> state;
  };

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
    if (op.bytes > INT_MAX) {
      op.state->complete(std::make_exception_ptr(CommError(fmt::format(
          "{}: {} B exceeds the 2^31 - 1 bytes one MPI message can carry; split the transfer",
          op.state->describe(), op.bytes))));
      return;
    }
    auto state = op.state;
    std::weak_ptr<MpiFunnel> weak = shared_from_this();
    state->cancel = [weak, s = state.get()] {
      if (auto f = weak.lock()) f->cancel(s);
    };
    const auto posted = Clock::now();
    command([this, op = std::move(op), is_recv, posted]() mutable {
      MPI_Request req = MPI_REQUEST_NULL;
      auto it = comms_.find(op.comm);
      if (it == comms_.end()) throw CommError("MPI transport: unknown communicator id");
      const int tag = static_cast<int>(op.tag);
      const int rc = is_recv ? MPI_Irecv(op.recv_data, static_cast<int>(op.bytes), MPI_BYTE, op.peer_group, tag,
                                         it->second, &req)
                             : MPI_Isend(op.send_data, static_cast<int>(op.bytes), MPI_BYTE, op.peer_group, tag,
                                         it->second, &req);
      if (rc != MPI_SUCCESS) {
        op.state->complete(std::make_exception_ptr(
            CommError(fmt::format("{}: MPI refused the post: {}", op.state->describe(), mpi_error_string(rc)))));
        return;
      }
      reqs_.push_back(req);
      entries_.push_back(Entry{std::move(op), is_recv, posted, {}});
    }, false);
  }

  // Withdraws a request; returns once MPI no longer uses its buffer (or after 2 s for a send
  // MPI cannot cancel -- an error path: the job is about to fail anyway).
  void cancel(detail::OpState* s) {
    auto retired = std::make_shared<std::promise<void>>();
    auto fut = retired->get_future();
    command([this, s, retired] {
      for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].op.state.get() == s) {
          MPI_Cancel(&reqs_[i]);
          entries_[i].retire_waiters.push_back(retired);
          return;
        }
      }
      retired->set_value();  // not outstanding (done, or not posted yet and never will be)
    }, false);
    fut.wait_for(std::chrono::seconds(2));
  }

  void retire(std::size_t i, const MPI_Status& st, int err) {
    Entry e = std::move(entries_[i]);
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
    reqs_.erase(reqs_.begin() + static_cast<std::ptrdiff_t>(i));
    std::exception_ptr error;
    int cancelled = 0;
    if (err == MPI_SUCCESS) MPI_Test_cancelled(&st, &cancelled);
    if (cancelled) {
      error = std::make_exception_ptr(CommError(fmt::format("{} was cancelled by its rank", e.op.state->describe())));
    } else if (err == MPI_ERR_TRUNCATE) {
      error = std::make_exception_ptr(CommError(fmt::format(
          "mismatched message: rank {} expected {} B for {} from peer {} but a larger message arrived -- the ranks "
          "called the operation with different counts or dtypes",
          e.op.state->core ? e.op.state->core->rank : rank_, e.op.bytes, e.op.state->describe(), e.op.peer_group)));
    } else if (err != MPI_SUCCESS) {
      error = std::make_exception_ptr(
          CommError(fmt::format("{} failed in MPI: {}", e.op.state->describe(), mpi_error_string(err))));
    } else if (e.is_recv) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      if (count != e.op.bytes) {
        error = std::make_exception_ptr(CommError(fmt::format(
            "mismatched message: rank {} expected {} B for {} from peer {} but received {} B -- the ranks called "
            "the operation with different counts or dtypes",
            e.op.state->core ? e.op.state->core->rank : rank_, e.op.bytes, e.op.state->describe(), e.op.peer_group,
            count)));
      }
    }
    for (auto& w : e.retire_waiters) w->set_value();
    const auto deadline = e.posted + link_.hop_time(rank_, e.op.peer_world, e.op.bytes);
    if (!error && deadline > Clock::now()) {
      delayed_.push_back({deadline, e.op.state});
    } else {
      e.op.state->complete(error);
    }
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
      std::deque<std::function<void()>> todo;
      bool stopping = false;
      {
        std::lock_guard lock(mutex_);
        todo.swap(commands_);
        stopping = stop_;
      }
      bool progressed = !todo.empty();
      for (auto& f : todo) f();
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
      if (stopping && reqs_.empty()) break;
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
          for (auto& en : entries_) en.op.state->complete(e);
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
        for (const auto& e : entries_) outstanding += e.op.bytes;
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
  {
    MemoryTracker tracker(fmt::format("rank {}", rt.rank()));
    try {
      Communicator world = rt.world(tracker);
      rc = fn(world);
    } catch (const std::exception& e) {
      failure = fmt::format("origami: rank {} failed: {}", rt.rank(), e.what());
    } catch (...) {
      failure = fmt::format("origami: rank {} failed with an unknown exception", rt.rank());
    }
  }
  if (!failure.empty()) rt.abort(1, failure);
  return rc;
}

}  // namespace origami::comm
