// Communication benchmark: latency, algorithm bandwidth and bus bandwidth (nccl-tests
// definitions) of point-to-point and every collective, over the threads and the MPI
// transports. A plain main(): multi-rank timing does not fit Google Benchmark's loop.
//
//   comm_bench threads [--ranks 2,4,8] [--min 8] [--max 67108864] [--ops all_reduce,...]
//   comm_bench mpi [...]                  (under mpirun: one rank per process)
//   comm_bench launch-mpi [--ranks 2,4,8] [...]  (runs `mpi` under mpirun for each size,
//                                              with origami::comm::mpirun_command's flags;
//                                              --mpirun-flags "..." adds flags)
//   comm_bench overlap-threads | overlap-mpi    (link model on: one 8 MB transfer that the
//                                              model makes take 0.2 s, overlapped with 0.1,
//                                              0.2 and 0.4 s of compute; total vs max and sum)
//
// Size S is the nccl-tests size: the whole buffer for all_reduce, broadcast, reduce and
// sendrecv; the whole gathered (or scattered) buffer for all_gather and reduce_scatter; the
// whole send buffer per rank for all_to_all. Time t is the mean per operation over the
// timed iterations, maximum over ranks. algbw = S / t; busbw = algbw * factor with factor
// 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all), 1 (broadcast,
// reduce, sendrecv). sendrecv: every rank sends S to rank+1 and receives S from rank-1.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "origami/comm/mpi_launch.h"
#include "origami/comm/mpi_transport.h"
#include "origami/comm/run_ranks.h"

using namespace origami;
using namespace origami::comm;

namespace {

struct Options {
  std::vector<int> ranks = {2, 4, 8};
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 64 << 20;
  std::vector<std::string> ops = {"sendrecv", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                  "all_to_all", "barrier"};
  std::string mpirun_flags;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return static_cast<double>(n - 1) / n;
  return 1.0;
}

// Runs one (op, size) on every rank; returns the mean seconds per op, max over ranks.
double time_op(Communicator& c, const std::string& op, std::int64_t bytes) {
  const int n = c.size(), r = c.rank();
  const std::int64_t count = std::max<std::int64_t>(1, bytes / 4);  // f32 elements of S
  const std::int64_t per_rank = std::max<std::int64_t>(1, count / n);
  std::vector<float> in, out;
  std::function<void()> run;
  if (op == "sendrecv") {
    in.assign(count, 1.f);
    out.assign(count, 0.f);
    run = [&] {
      Handle a = c.irecv(out, (r - 1 + n) % n, 0);
      Handle b = c.isend(in, (r + 1) % n, 0);
      a.wait();
      b.wait();
    };
  } else if (op == "all_reduce") {
    in.assign(count, 1.f);
    out.assign(count, 0.f);
    run = [&] { c.all_reduce(in, out); };
  } else if (op == "all_gather") {
    in.assign(per_rank, 1.f);
    out.assign(per_rank * n, 0.f);
    run = [&] { c.all_gather(in, out); };
  } else if (op == "reduce_scatter") {
    in.assign(per_rank * n, 1.f);
    out.assign(per_rank, 0.f);
    run = [&] { c.reduce_scatter(in, out); };
  } else if (op == "broadcast") {
    in.assign(count, 1.f);
    run = [&] { c.broadcast(in, 0); };
  } else if (op == "reduce") {
    in.assign(count, 1.f);
    out.assign(count, 0.f);
    run = [&] { c.reduce(in, out, 0); };
  } else if (op == "all_to_all") {
    in.assign(per_rank * n, 1.f);
    out.assign(per_rank * n, 0.f);
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n), per_rank);
    run = [&, counts] { c.all_to_all(in, counts, out, counts); };
  } else if (op == "barrier") {
    run = [&] { c.barrier(); };
  } else {
    throw ConfigError("unknown op " + op);
  }
  // Few iterations for large sizes: eight ranks share two cores here.
  const int iters = static_cast<int>(std::clamp<std::int64_t>((std::int64_t{32} << 20) / std::max<std::int64_t>(bytes, 1), 3, 50));
  run();  // warm-up (connections, first touch)
  c.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run();
  const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  std::vector<double> t = {mine};
  c.all_reduce(t, t, ReduceOp::Max);
  return t[0];
}

void bench_world(Communicator& c, const Options& o, const std::string& transport) {
  for (const auto& op : o.ops) {
    for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
      const std::int64_t b = std::min(bytes, o.max_bytes);
      // The size actually moved (whole f32 elements, divisible by n where the op needs it).
      const int n = c.size();
      std::int64_t s = std::max<std::int64_t>(1, b / 4) * 4;
      if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") s = std::max<std::int64_t>(1, b / 4 / n) * n * 4;
      if (op == "barrier") s = 0;
      const double t = time_op(c, op, b);
      if (c.rank() == 0) {
        const double alg = static_cast<double>(s) / t / 1e9;  // 0 for the barrier
        std::printf("| %s | %d | %s | %lld | %.1f | %.3f | %.3f |\n", transport.c_str(), n, op.c_str(),
                    static_cast<long long>(s), t * 1e6, alg, alg * bus_factor(op, n));
        std::fflush(stdout);
      }
      if (bytes == o.max_bytes || op == "barrier") break;  // a barrier has no size
      if (bytes * 4 > o.max_bytes && bytes != o.max_bytes) bytes = o.max_bytes / 4;  // end exactly at max
    }
  }
}

double busy_for(double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  double acc = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    for (int i = 0; i < 10000; ++i) acc += static_cast<double>(i) * 1e-9 + acc * 1e-12;
  }
  return acc;
}

// Rank 1 posts a receive, computes, then waits; the link model makes the transfer take
// `transfer` seconds. Prints total against max and sum (rank 1's view), 3 repetitions each.
void overlap(Communicator& c, const std::string& transport) {
  const double transfer = 0.2;
  std::vector<float> buf(2000000);  // 8 MB
  if (c.rank() == 1) {
    std::printf("| transport | transfer s | compute s | total s | max s | sum s | hidden fraction |\n|---|---|---|---|---|---|---|\n");
  }
  for (double compute : {0.1, 0.2, 0.4}) {
    for (int rep = 0; rep < 3; ++rep) {
      c.barrier();
      if (c.rank() == 0) {
        c.send(buf, 1, 0);
      } else if (c.rank() == 1) {
        const auto t0 = std::chrono::steady_clock::now();
        Handle h = c.irecv(buf, 0, 0);
        volatile double sink = busy_for(compute);
        (void)sink;
        h.wait();
        const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double mx = std::max(transfer, compute), sum = transfer + compute;
        // 1 = the shorter of the two was completely hidden, 0 = none of it.
        std::printf("| %s | %.2f | %.2f | %.3f | %.2f | %.2f | %.2f |\n", transport.c_str(), transfer, compute, total, mx,
                    sum, (sum - total) / std::min(transfer, compute));
        std::fflush(stdout);
      }
    }
  }
}

LinkModel overlap_link() {
  LinkModel l;
  l.enabled = true;
  l.intra_alpha_s = 0;
  l.intra_beta_Bps = 8e6 / 0.2;  // the 8 MB message takes 0.2 s
  return l;
}

void header() {
  std::printf("| transport | ranks | op | bytes | time us | algbw GB/s | busbw GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
}

Options parse(int argc, char** argv, int first) {
  Options o;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError("missing value after " + a);
      return argv[++i];
    };
    if (a == "--ranks") {
      o.ranks.clear();
      for (const auto& x : split_list(next())) o.ranks.push_back(std::stoi(x));
    } else if (a == "--min") {
      o.min_bytes = std::stoll(next());
    } else if (a == "--max") {
      o.max_bytes = std::stoll(next());
    } else if (a == "--ops") {
      o.ops = split_list(next());
    } else if (a == "--mpirun-flags") {
      o.mpirun_flags = next();
    } else {
      throw ConfigError("unknown argument " + a);
    }
  }
  return o;
}

std::vector<std::string> forward_args(const Options& o) {
  std::string ops;
  for (const auto& x : o.ops) ops += (ops.empty() ? "" : ",") + x;
  return {"--min", std::to_string(o.min_bytes), "--max", std::to_string(o.max_bytes), "--ops", ops};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "threads";
    const Options o = parse(argc, argv, 2);
    if (mode == "threads") {
      header();
      for (int n : o.ranks) run_ranks(n, [&](Communicator& c) { bench_world(c, o, "threads"); });
      return 0;
    }
    if (mode == "mpi") {
      return mpi_main([&](Communicator& c) {
        bench_world(c, o, "mpi");
        return 0;
      });
    }
    if (mode == "overlap-threads") {
      RunOptions ro;
      ro.link = overlap_link();
      run_ranks(2, [&](Communicator& c) { overlap(c, "threads"); }, ro);
      return 0;
    }
    if (mode == "overlap-mpi") {
      return mpi_main([&](Communicator& c) {
        overlap(c, "mpi");
        return 0;
      }, overlap_link());
    }
    if (mode == "launch-mpi") {
      header();
      for (int n : o.ranks) {
        std::vector<std::string> prog = {"/proc/self/exe", "mpi"};
        char self[4096];
        const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len > 0) prog[0] = std::string(self, static_cast<std::size_t>(len));
        auto fwd = forward_args(o);
        prog.insert(prog.end(), fwd.begin(), fwd.end());
        MpirunOptions mo;
        // Flag experiments (e.g. --mca btl_vader_single_copy_mechanism none) come from the caller.
        std::stringstream ss(o.mpirun_flags);
        for (std::string f; ss >> f;) mo.extra.push_back(f);
        const auto cmd = mpirun_command(n, prog, mo);
        std::fprintf(stderr, "+ %s\n", shell_join(cmd).c_str());
        std::fflush(stdout);
        const pid_t pid = ::fork();
        if (pid == 0) {
          std::vector<char*> args;
          for (const auto& a : cmd) args.push_back(const_cast<char*>(a.c_str()));
          args.push_back(nullptr);
          ::execvp(args[0], args.data());
          std::_Exit(127);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          std::fprintf(stderr, "mpirun with %d ranks failed\n", n);
          return 1;
        }
      }
      return 0;
    }
    throw ConfigError("unknown mode " + mode + " (threads, mpi, launch-mpi)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_bench: %s\n", e.what());
    return 2;
  }
}
