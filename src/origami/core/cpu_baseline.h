// The x86-64 level the build assumes everywhere (CMake's ORIGAMI_BASELINE, x86-64-v2 by default),
// checked against the CPU before any other code of the program runs, so that a CPU below it
// gets a message naming what it lacks instead of SIGILL.
//
// Plain C types only: this runs before the C++ runtime's other constructors, and an inline C++
// template shared with the rest of the build could be the copy compiled for the baseline.
#pragma once

#include <cstddef>

namespace origami {

// "x86-64", "x86-64-v2", "x86-64-v3", or "native" (then nothing can be checked).
const char* cpu_baseline();

using CpuFeatureTest = bool (*)(const char* feature);

// Writes into `missing` (room for `capacity`) the features of `baseline` for which `has` is
// false, by their /proc/cpuinfo names; returns how many. An unknown baseline lists none.
std::size_t missing_cpu_features(const char* baseline, CpuFeatureTest has, const char** missing,
                                 std::size_t capacity);

// Whether this CPU has `feature` (one of the names missing_cpu_features uses).
bool cpu_has(const char* feature);

// The refusal for a CPU that lacks `missing`, into `out` (always NUL-terminated).
void cpu_baseline_message(const char* baseline, const char* const* missing, std::size_t count,
                          char* out, std::size_t out_size);

}  // namespace origami
