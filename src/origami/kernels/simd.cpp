#include "origami/kernels/simd.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "origami/core/cpu_baseline.h"
#include "origami/core/error.h"

namespace origami::kernels {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Compiled here (HWY_TARGETS: this file is built with the kernels' flags) and supported by the
// CPU, best first. Read once, before use_simd_target can first restrict Highway's view.
const std::vector<std::int64_t>& cpu_targets() {
  (void)cpu_baseline();  // links the CPU check (core/cpu_baseline.cpp) into every program
  static const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
}

std::string joined_names() {
  std::string names;
  for (const std::string& t : simd_targets()) names += (names.empty() ? "" : ", ") + t;
  return names;
}

}  // namespace

std::string simd_target() {
  (void)cpu_targets();
  const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ORIGAMI_CHECK(!targets.empty(), "no SIMD target of this build runs on this CPU");
  return lower(hwy::TargetName(targets.front()));
}

std::vector<std::string> simd_targets() {
  std::vector<std::string> names;
  for (std::int64_t t : cpu_targets()) names.push_back(lower(hwy::TargetName(t)));
  return names;
}

void use_simd_target(const std::string& name) {
  const std::string wanted = lower(name);
  std::int64_t chosen = 0;  // 0: no restriction
  for (std::int64_t t : cpu_targets()) {
    if (lower(hwy::TargetName(t)) == wanted) chosen = t;
  }
  if (!wanted.empty() && chosen == 0) {
    throw ConfigError(fmt::format("SIMD target '{}' is not among this build's targets that this "
                                  "CPU supports ({})",
                                  name, joined_names()));
  }
  // Highway then dispatches every kernel afresh, to the best target of this mask.
  hwy::SetSupportedTargetsForTest(chosen);
}

void use_simd_target_from_env() {
  const char* env = std::getenv("ORIGAMI_SIMD");
  if (env == nullptr || *env == '\0') return;
  try {
    use_simd_target(env);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("ORIGAMI_SIMD: {}", e.what()));
  }
}

}  // namespace origami::kernels
