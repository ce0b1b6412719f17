#include "origami/cli/machine_peak.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.h>

#include "origami/kernels/gemm.h"
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
