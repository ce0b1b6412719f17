// The peak that MFU is stated against when the user gives none: oneDNN's fp32 GEMM rate on one
// core of this machine, measured by a short calibration (about 0.1-0.5 s) and cached per machine,
// so that MFU never borrows another machine's constant.
#pragma once

#include <cstdint>
#include <string>

namespace origami::cli {

struct MachinePeak {
  double gflops_per_thread = 0;  // oneDNN sgemm, N = 1024, one thread, best of several runs
  std::string cpu;               // the CPU model it was measured on
  std::string source;            // "measured", or "cached in <file>"
};

// The CPU model from /proc/cpuinfo ("unknown CPU" where it cannot be read).
std::string cpu_model_name();

// Reads the cached rate for this CPU, SIMD target and oneDNN version, or measures and caches it.
// The cache is $XDG_CACHE_HOME/origami/machine-peak.json (else ~/.cache/...); a cache that
// cannot be read or written only costs the measurement.
MachinePeak machine_peak();

// The ceiling a decode step is stated against (each step reads every weight once, so its
// limit is bytes of weights / bandwidth): what `threads` threads reach streaming through a buffer
// far larger than the caches, STREAM-like, per second of the slowest thread's CPU time (time
// descheduled by other work on a shared machine is not charged), cached per machine as the
// peak is.
struct MemoryBandwidth {
  double read_gbs = 0;  // 1e9 bytes/s summing kBandwidthBytes of floats (kernels::sum: the widest
                        // vectors, four accumulators, one range per thread), best of several passes
  double copy_gbs = 0;  // copying half of it onto the other half, bytes read + written (STREAM's
                        // count)
  int threads = 1;
  std::string source;  // "measured", or "cached in <file>"
};

// The probe's buffer: 256 MiB, past any L3 of one CPU die (32 MiB here, 96 MiB with V-Cache).
inline constexpr std::int64_t kBandwidthBytes = std::int64_t{256} << 20;

// Reads the cached figures for this CPU and thread count, or measures (about 0.3 s) and caches
// them, in the same file as the peak.
MemoryBandwidth memory_bandwidth(int threads);

// The measurement alone, best of `runs` passes after one that touches the pages.
MemoryBandwidth measure_memory_bandwidth(int threads, int runs);

// The measurement alone: GFLOP/s of a 1024^3 sgemm on the calling thread per second of its CPU
// time, best of `runs`.
double measure_sgemm_gflops(int runs);

}  // namespace origami::cli
