// Which SIMD target the kernels run on. Every vectorised kernel is compiled for several targets
// (Google Highway: SSE4, AVX2, AVX3 = AVX-512, AVX3_DL = AVX-512 of Ice Lake / Zen 4 and later)
// and dispatches at run time to the best one that this CPU supports and that has not been
// excluded here. kernels/README.md says how a kernel is written for that.
#pragma once

#include <string>
#include <vector>

namespace origami::kernels {

// The target the kernels dispatch to now, as Highway names it in lower case ("avx3_dl").
std::string simd_target();

// The targets compiled into this build that this CPU supports, best first.
std::vector<std::string> simd_targets();

// Restricts dispatch to one of simd_targets() from now on (for every thread); an empty name
// lifts the restriction. A name not in simd_targets() is a ConfigError naming them.
void use_simd_target(const std::string& name);

// Applies ORIGAMI_SIMD=<target> from the environment, if set (the programs call it at start;
// the way to run an AVX2 path on an AVX-512 machine, as ONEDNN_MAX_CPU_ISA does for oneDNN).
void use_simd_target_from_env();

}  // namespace origami::kernels
