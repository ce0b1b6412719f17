#include "origami/kernels/swiglu.h"

#include "origami/core/error.h"
#include "origami/kernels/parallel.h"
#include "origami/kernels/vec_math.h"

namespace origami::kernels {

namespace {
constexpr std::int64_t kGrain = 16384;
}  // namespace

void swiglu_forward(std::int64_t n, const float* a, const float* u, float* g) {
  ORIGAMI_CHECK(n >= 0, "swiglu_forward: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
    for (std::int64_t i = i0; i < i1; ++i) {
      const float s = detail::sigmoid_approx(a[i]);
      g[i] = a[i] * s * u[i];
    }
  });
}

void swiglu_backward(std::int64_t n, const float* a, const float* u, const float* dg, float* da,
                     float* du) {
  ORIGAMI_CHECK(n >= 0, "swiglu_backward: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
    for (std::int64_t i = i0; i < i1; ++i) {
      const float s = detail::sigmoid_approx(a[i]);
      const float silu = a[i] * s;
      // silu'(a) = s + a s (1 - s) = s (1 + a (1 - s))
      const float dsilu = s * (1.0f + a[i] * (1.0f - s));
      da[i] += dg[i] * u[i] * dsilu;
      du[i] += dg[i] * silu;
    }
  });
}

}  // namespace origami::kernels
