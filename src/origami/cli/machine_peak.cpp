#include "origami/cli/machine_peak.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.h>

#include "origami/core/error.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/parallel.h"
#include "origami/kernels/reduce.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"

namespace origami::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kN = 1024;  // large enough for oneDNN's full rate, 8 MiB of operands

fs::path cache_file() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return fs::path(xdg) / "origami" / "machine-peak.json";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return fs::path(home) / ".cache" / "origami" / "machine-peak.json";
  return {};
}

// What the rate depends on: the CPU, the instruction set the kernels and oneDNN use, oneDNN.
std::string cache_key(const std::string& cpu) {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  return fmt::format("{} | simd {} | oneDNN {}.{}.{} | max ISA {}", cpu, kernels::simd_target(),
                     v->major, v->minor, v->patch, isa == nullptr ? "all" : isa);
}

nlohmann::json read_cache(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Written to a temporary file and renamed, so that concurrent runs never read half a file.
void write_cache(const fs::path& file, const nlohmann::json& j) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = file.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;
    out << j.dump(2) << "\n";
    if (!out) return;
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(" \t"));
        return name;
      }
    }
  }
  return "unknown CPU";
}

double measure_sgemm_gflops(int runs) {
  const int saved = kernels::thread_count();
  kernels::set_thread_count(1);
  std::vector<float> a(static_cast<std::size_t>(kN * kN), 0.5f), b(a.size(), 0.25f), c(a.size());
  // CPU time of this thread, not wall time: one thread's GEMM runs on the calling thread, and
  // a machine shared with other work must not make its own core look slower than it is.
  const auto thread_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  double best = 1e30;
  for (int r = 0; r < runs + 1; ++r) {  // the first run warms the caches and oneDNN's JIT
    const double t0 = thread_seconds();
    kernels::gemm(kernels::Trans::N, kernels::Trans::N, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
                  kN, 0.0f, c.data(), kN);
    if (r > 0) best = std::min(best, thread_seconds() - t0);
  }
  kernels::set_thread_count(saved);
  return kernels::gemm_flops(kN, kN, kN) / best / 1e9;
}

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// body(begin, end, part) over [0, n) in one range per thread; the seconds of the slowest
// range, in CPU time of the thread that ran it: on a machine shared with other work, time a
// thread spends descheduled is not charged to the memory (as the sgemm peak does).
template <class Body>
double timed_split(std::int64_t n, int threads, const Body& body) {
  const std::int64_t part = (n + threads - 1) / threads;
  std::vector<double> seconds(static_cast<std::size_t>(threads) * 8, 0.0);  // 64 bytes apart
  kernels::detail::parallel_for(n, part, [&](std::int64_t b, std::int64_t e) {
    const double t0 = thread_cpu_seconds();
    body(b, e, b / part);
    seconds[static_cast<std::size_t>(b / part) * 8] = thread_cpu_seconds() - t0;
  });
  return *std::max_element(seconds.begin(), seconds.end());
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(int threads, int runs) {
  threads = std::max(1, threads);
  const int saved = kernels::thread_count();
  kernels::set_thread_count(threads);
  const std::int64_t n = kBandwidthBytes / static_cast<std::int64_t>(sizeof(float)), half = n / 2;
  // Aligned to a cache line as Tensor's data is (core/tensor.cpp): a vector's data sits 16 bytes
  // past a page, and every 64-byte load of it then spans two lines.
  const std::unique_ptr<float, decltype(&std::free)> owned(
      static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>(n) * sizeof(float))),
      &std::free);
  ORIGAMI_CHECK(owned != nullptr, "memory_bandwidth: cannot allocate the {} MiB probe buffer",
                kBandwidthBytes >> 20);
  const std::span<float> buf(owned.get(), static_cast<std::size_t>(n));
  std::fill(buf.begin(), buf.end(), 1.0f);  // written: the pages are touched
  std::vector<float> sums(static_cast<std::size_t>(threads) * 16, 0.0f);  // 64 bytes apart
  double best_read = 1e30, best_copy = 1e30;
  for (int r = 0; r < runs + 1; ++r) {
    const double read =
        timed_split(n, threads, [&](std::int64_t b, std::int64_t e, std::int64_t part) {
          sums[static_cast<std::size_t>(part) * 16] += kernels::sum(e - b, buf.data() + b);
        });
    const double copy =
        timed_split(half, threads, [&](std::int64_t b, std::int64_t e, std::int64_t) {
          std::memcpy(buf.data() + half + b, buf.data() + b,
                      static_cast<std::size_t>(e - b) * sizeof(float));
        });
    if (r > 0) {
      best_read = std::min(best_read, read);
      best_copy = std::min(best_copy, copy);
    }
  }
  kernels::set_thread_count(saved);
  // The sums are used, so that no pass can be optimised away.
  volatile float sink = std::accumulate(sums.begin(), sums.end(), 0.0f);
  (void)sink;
  MemoryBandwidth m;
  m.threads = threads;
  m.read_gbs = static_cast<double>(n) * sizeof(float) / best_read / 1e9;
  m.copy_gbs = 2.0 * static_cast<double>(half) * sizeof(float) / best_copy / 1e9;
  m.source = "measured";
  return m;
}

MemoryBandwidth memory_bandwidth(int threads) {
  const std::string key =
      // The SIMD target is part of the key: the read pass runs on its vectors. ("v2": the
      // figures cached before 2026-12-02 came from SSE-wide adds over an unaligned buffer, below
      // what one Zen 5 core reads: 27.8-31.5 GB/s where this probe reads 32.6-36.7, loaded
      // machine, docs/inference.md.)
      fmt::format("{} | memory bandwidth v2 | {} | {} threads", cpu_model_name(),
                  kernels::simd_target(), std::max(1, threads));
  const fs::path file = cache_file();
  nlohmann::json cache = file.empty() ? nlohmann::json::object() : read_cache(file);
  if (cache.contains(key) && cache[key].is_object()) {
    const nlohmann::json& c = cache[key];
    const auto positive = [&](const char* field) {  // a damaged entry is measured again
      return c.contains(field) && c[field].is_number() && c[field].get<double>() > 0;
    };
    if (positive("read_gbs") && positive("copy_gbs")) {
      MemoryBandwidth m;
      m.threads = std::max(1, threads);
      m.read_gbs = c["read_gbs"].get<double>();
      m.copy_gbs = c["copy_gbs"].get<double>();
      m.source = "cached in " + file.string();
      return m;
    }
  }
  MemoryBandwidth m = measure_memory_bandwidth(threads, 5);
  if (!file.empty()) {
    cache[key] = {{"read_gbs", m.read_gbs}, {"copy_gbs", m.copy_gbs}};
    write_cache(file, cache);
  }
  return m;
}

MachinePeak machine_peak() {
  MachinePeak p;
  p.cpu = cpu_model_name();
  const std::string key = cache_key(p.cpu);
  const fs::path file = cache_file();
  nlohmann::json cache = file.empty() ? nlohmann::json::object() : read_cache(file);
  if (cache.contains(key) && cache[key].is_number() && cache[key].get<double>() > 0) {
    p.gflops_per_thread = cache[key].get<double>();
    p.source = "cached in " + file.string();
    return p;
  }
  p.gflops_per_thread = measure_sgemm_gflops(8);
  p.source = "measured";
  if (!file.empty()) {
    cache[key] = p.gflops_per_thread;
    write_cache(file, cache);
  }
  return p;
}

}  // namespace origami::cli
