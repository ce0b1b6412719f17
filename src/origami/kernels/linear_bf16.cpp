// linear_forward on a bf16 W (kernels/gemm.h), the products of the bf16 prefill. Two paths,
// chosen per CPU at run time by gemm_bf16_native():
//   native    x rounded to bf16, then gemm_bf16 (oneDNN's bf16 matmul: the CPU's bf16 dot
//             products, fp32 accumulation). oneDNN 2.6's matmul takes no fp32 source with bf16
//             weights, hence the rounding of x, the one precision given up;
//   widening  W's rows widened exactly to fp32 and the fp32 gemm on the unrounded x: where the
//             CPU has no bf16 dot products oneDNN's bf16 matmul is emulated (0.37x of sgemm on
//             AVX-512) or reference code (AVX2), so fp32 is the faster product there, and the
//             result is what the prefill computed before it read bf16 shards.
// Scratch is per thread (ranks are threads) and bounded (4 MiB): a long prompt is cut into row
// blocks of x, a wide W into row blocks of W, so neither grows with the prompt or the model.
#include <algorithm>
#include <string>
#include <vector>

#include "origami/core/dry_run.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"

namespace origami::kernels::detail {

namespace {

constexpr std::int64_t kScratchBytes = std::int64_t{4} << 20;

// Rows of `width` elements of `elem_bytes` each that fit the scratch: at least 16, at most
// `total`.
std::int64_t block_rows(std::int64_t width, std::int64_t elem_bytes, std::int64_t total) {
  const std::int64_t fit = kScratchBytes / (elem_bytes * std::max<std::int64_t>(1, width));
  return std::min(total, std::max<std::int64_t>(16, fit));
}

}  // namespace

void linear_forward_bf16(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                         const bf16* W, float* y, bool accumulate) {
  // Dry run: gemm_bf16's charge (2·rows·out·in, W and x read once at half the bytes).
  if (dryrun::skip_kernel(gemm_flops(rows, out, in), static_cast<double>(rows * in + in * out) / 2))
    return;
  const std::int64_t ld_in = std::max<std::int64_t>(1, in), ld_out = std::max<std::int64_t>(1, out);
  check_gemm_shape("linear_forward", Trans::N, Trans::T, rows, out, in, ld_in, ld_in, ld_out);
  if (rows == 0 || out == 0) return;
  const float beta = accumulate ? 1.0f : 0.0f;
  if (gemm_bf16_native()) {
    thread_local std::vector<bf16> xb;
    const std::int64_t mb = block_rows(in, 2, rows);
    xb.resize(static_cast<std::size_t>(mb * in));
    for (std::int64_t r0 = 0; r0 < rows; r0 += mb) {
      const std::int64_t m = std::min(mb, rows - r0);
      convert_to_bf16(m * in, x + r0 * in, xb.data());
      gemm_bf16(Trans::N, Trans::T, m, out, in, 1.0f, xb.data(), ld_in, W, ld_in, beta,
                y + r0 * out, ld_out);
    }
    return;
  }
  thread_local std::vector<float> wf;
  const std::int64_t nb = block_rows(in, 4, out);
  wf.resize(static_cast<std::size_t>(nb * in));
  for (std::int64_t o0 = 0; o0 < out; o0 += nb) {
    const std::int64_t n = std::min(nb, out - o0);
    convert_to_float(n * in, W + o0 * in, wf.data());
    gemm(Trans::N, Trans::T, rows, n, in, 1.0f, x, ld_in, wf.data(), ld_in, beta, y + o0, ld_out);
  }
}

}  // namespace origami::kernels::detail

namespace origami::kernels {

std::string linear_forward_bf16_path() {
  return (gemm_bf16_native() ? "bf16 matmul on activations rounded to bf16, "
                             : "bf16 weights widened to fp32 for fp32 GEMMs, ") +
         gemm_bf16_path();
}

}  // namespace origami::kernels
