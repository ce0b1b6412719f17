// Shared helpers for the kernel tests: random inputs, the per-tensor error measure, and a
// guard for the calling thread's kernel thread count.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/kernels/threads.h"

namespace origami::kernels::testing {

// The project's fp32 parity bound: per tensor, ||a - b|| / ||b|| <= 1e-5, with b the float64
// reference (a per-element relative bound is flaky near zero).
inline constexpr double kRelTol = 1e-5;

inline std::vector<float> random_floats(std::mt19937& rng, std::int64_t n, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// ||a - b|| / ||b||; when b is exactly zero, ||a|| (so a zero reference demands a zero result).
template <class A, class B>
double rel_l2(const std::vector<A>& a, const std::vector<B>& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

template <class A, class B>
::testing::AssertionResult RelClose(const std::vector<A>& a, const std::vector<B>& b,
                                    double tol = kRelTol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(static_cast<double>(a[i])))
      return ::testing::AssertionFailure() << "element " << i << " is not finite: " << a[i];
  const double e = rel_l2(a, b);
  if (e <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative L2 error " << e << " > " << tol;
}

// Central finite difference of a double function at x, per coordinate.
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                            std::vector<double> x, double step = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + step;
    const double up = f(x);
    x[i] = keep - step;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2.0 * step);
  }
  return g;
}

// Sets the calling thread's kernel thread count for a scope.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int n) : saved_(thread_count()) { set_thread_count(n); }
  ~ThreadCountScope() { set_thread_count(saved_); }
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int saved_;
};

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

}  // namespace origami::kernels::testing
