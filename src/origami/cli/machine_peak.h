// The peak that MFU is stated against when the user gives none: oneDNN's fp32 GEMM rate on one
// core of this machine, measured by a short calibration (about 0.1-0.5 s) and cached per machine,
// so that MFU never borrows another machine's constant.
#pragma once

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

// The measurement alone: GFLOP/s of a 1024^3 sgemm on the calling thread per second of its CPU
// time, best of `runs`.
double measure_sgemm_gflops(int runs);

}  // namespace origami::cli
