#include "origami/kernels/swiglu.h"

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"
#include "origami/kernels/vec_math.h"

namespace origami::kernels {

namespace {

constexpr std::int64_t kGrain = 16384;

// The loops live in functions with plain pointer parameters rather than in the
// lambdas: pointers captured in a closure are reloaded after every store, which stops GCC from
// vectorising.
void forward_range(std::int64_t i0, std::int64_t i1, const float* a,
                   const float* u, float* g) {
#pragma omp simd
  for (std::int64_t i = i0; i < i1; ++i) g[i] = a[i] * detail::sigmoid_approx(a[i]) * u[i];
}

void backward_range(std::int64_t i0, std::int64_t i1, const float* a,
                    const float* u, const float* dg, float* da,
                    float* du) {
#pragma omp simd
  for (std::int64_t i = i0; i < i1; ++i) {
    const float s = detail::sigmoid_approx(a[i]);
    const float silu = a[i] * s;
    // silu'(a) = s + a s (1 - s) = s (1 + a (1 - s))
    const float dsilu = s * (1.0f + a[i] * (1.0f - s));
    da[i] += dg[i] * u[i] * dsilu;
    du[i] += dg[i] * silu;
  }
}

}  // namespace

void swiglu_forward(std::int64_t n, const float* a, const float* u, float* g) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_forward: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    forward_range(i0, i1, a, u, g);
  });
}

void swiglu_backward(std::int64_t n, const float* a, const float* u, const float* dg, float* da,
                     float* du) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_backward: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    backward_range(i0, i1, a, u, dg, da, du);
  });
}

}  // namespace origami::kernels
