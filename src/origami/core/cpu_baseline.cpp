// Compiled for plain x86-64 whatever the baseline (CMakeLists.txt), so that it runs on the CPUs
// it is there to refuse. It runs from a constructor of priority 101, before the constructors of
// every other file (which may already use the baseline's instructions).
#include "origami/core/cpu_baseline.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef ORIGAMI_BASELINE
#define ORIGAMI_BASELINE "x86-64-v2"
#endif

namespace origami {
namespace {

// The levels of the x86-64 psABI, each with the features it adds to the one before, as far as
// the compiler's CPU check can tell them apart.
struct Level {
  const char* name;
  const char* features[8];  // null-terminated
};
constexpr Level kLevels[] = {
    {"x86-64", {nullptr}},
    {"x86-64-v2", {"cx16", "popcnt", "sse3", "ssse3", "sse4_1", "sse4_2", nullptr}},
    {"x86-64-v3", {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", nullptr}},
};

}  // namespace

const char* cpu_baseline() { return ORIGAMI_BASELINE; }

std::size_t missing_cpu_features(const char* baseline, CpuFeatureTest has, const char** missing,
                                 std::size_t capacity) {
  bool known = false;
  for (const Level& level : kLevels) known = known || std::strcmp(level.name, baseline) == 0;
  if (!known) return 0;
  std::size_t count = 0;
  for (const Level& level : kLevels) {
    for (const char* const* f = level.features; *f != nullptr; ++f) {
      if (!has(*f) && count < capacity) missing[count++] = *f;
    }
    if (std::strcmp(level.name, baseline) == 0) break;
  }
  return count;
}

bool cpu_has(const char* f) {
  __builtin_cpu_init();
  const auto is = [f](const char* name) { return std::strcmp(f, name) == 0; };
  if (is("cx16")) return __builtin_cpu_supports("cmpxchg16b");
  if (is("popcnt")) return __builtin_cpu_supports("popcnt");
  if (is("sse3")) return __builtin_cpu_supports("sse3");
  if (is("ssse3")) return __builtin_cpu_supports("ssse3");
  if (is("sse4_1")) return __builtin_cpu_supports("sse4.1");
  if (is("sse4_2")) return __builtin_cpu_supports("sse4.2");
  if (is("avx")) return __builtin_cpu_supports("avx");
  if (is("avx2")) return __builtin_cpu_supports("avx2");
  if (is("bmi1")) return __builtin_cpu_supports("bmi");
  if (is("bmi2")) return __builtin_cpu_supports("bmi2");
  if (is("f16c")) return __builtin_cpu_supports("f16c");
  if (is("fma")) return __builtin_cpu_supports("fma");
  if (is("movbe")) return __builtin_cpu_supports("movbe");
  return false;
}

void cpu_baseline_message(const char* baseline, const char* const* missing, std::size_t count,
                          char* out, std::size_t out_size) {
  if (out_size == 0) return;
  std::size_t used = static_cast<std::size_t>(
      std::snprintf(out, out_size, "origami: this CPU lacks"));
  for (std::size_t i = 0; i < count && used < out_size; ++i) {
    used += static_cast<std::size_t>(
        std::snprintf(out + used, out_size - used, "%s %s", i == 0 ? "" : ",", missing[i]));
  }
  if (used < out_size) {
    std::snprintf(out + used, out_size - used,
                  ", which this build (baseline %s) needs; rebuild with cmake "
                  "-DORIGAMI_BASELINE=x86-64 to run on it",
                  baseline);
  }
}

namespace {
// ORIGAMI_TEST_HIDE_CPU_FEATURE=name makes this check treat `name` as absent, so that tests can
// see the refusal on a CPU that has everything.
bool cpu_has_unless_hidden(const char* f) {
  const char* hidden = std::getenv("ORIGAMI_TEST_HIDE_CPU_FEATURE");
  return (hidden == nullptr || std::strcmp(hidden, f) != 0) && cpu_has(f);
}

__attribute__((constructor(101))) void refuse_cpus_below_the_baseline() {
  const char* missing[32];
  const std::size_t count =
      missing_cpu_features(cpu_baseline(), cpu_has_unless_hidden, missing, 32);
  if (count == 0) return;
  char message[512];
  cpu_baseline_message(cpu_baseline(), missing, count, message, sizeof message);
  std::fprintf(stderr, "%s\n", message);
  _exit(2);
}
}  // namespace

}  // namespace origami
