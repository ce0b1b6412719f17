// The main of the benchmarks that time the SIMD kernels: ORIGAMI_SIMD=<target> restricts the
// dispatch (kernels/simd.h) before anything runs, and the target the kernels ran on is written
// into the benchmark's context (its "simd_target" line and JSON field).
#pragma once

#include <benchmark/benchmark.h>

#include "origami/kernels/simd.h"

#define ORIGAMI_SIMD_BENCHMARK_MAIN()                                             \
  int main(int argc, char** argv) {                                               \
    origami::kernels::use_simd_target_from_env();                                 \
    benchmark::AddCustomContext("simd_target", origami::kernels::simd_target()); \
    benchmark::Initialize(&argc, argv);                                           \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;             \
    benchmark::RunSpecifiedBenchmarks();                                          \
    benchmark::Shutdown();                                                        \
    return 0;                                                                     \
  }
