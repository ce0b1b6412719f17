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

// dx[rows,in] += dy[rows,out] @ W[out,in]. Native: row blocks of dy rounded to bf16 (the
// product's K is out, so a block holds whole rows of dy). Widening: blocks of W's rows (a slice
// of K) widened and accumulated into dx one after another.
void linear_backward_input_bf16(std::int64_t rows, std::int64_t in, std::int64_t out,
                                const float* dy, const bf16* W, float* dx) {
  if (dryrun::skip_kernel(gemm_flops(rows, in, out),
                          static_cast<double>(rows * out + in * out) / 2))
    return;
  const std::int64_t ld_in = std::max<std::int64_t>(1, in), ld_out = std::max<std::int64_t>(1, out);
  check_gemm_shape("linear_backward_input", Trans::N, Trans::N, rows, in, out, ld_out, ld_in,
                   ld_in);
  if (rows == 0 || in == 0) return;
  if (gemm_bf16_native()) {
    thread_local std::vector<bf16> dyb;
    const std::int64_t mb = block_rows(out, 2, rows);
    dyb.resize(static_cast<std::size_t>(mb * out));
    for (std::int64_t r0 = 0; r0 < rows; r0 += mb) {
      const std::int64_t m = std::min(mb, rows - r0);
      convert_to_bf16(m * out, dy + r0 * out, dyb.data());
      gemm_bf16(Trans::N, Trans::N, m, in, out, 1.0f, dyb.data(), ld_out, W, ld_in, 1.0f,
                dx + r0 * in, ld_in);
    }
    return;
  }
  thread_local std::vector<float> wf;
  const std::int64_t kb = block_rows(in, 4, out);
  wf.resize(static_cast<std::size_t>(kb * in));
  for (std::int64_t o0 = 0; o0 < out; o0 += kb) {
    const std::int64_t k = std::min(kb, out - o0);
    convert_to_float(k * in, W + o0 * in, wf.data());
    gemm(Trans::N, Trans::N, rows, in, k, 1.0f, dy + o0, ld_out, wf.data(), ld_in, 1.0f, dx,
         ld_in);
  }
}

// dW[out,in] += dy^T @ x on the native path (linear_backward_weight takes the fp32 gemm
// elsewhere): blocks of token rows (the product's K) of dy and x rounded to bf16, each block's
// product accumulated into dW in fp32.
void linear_backward_weight_bf16(std::int64_t rows, std::int64_t in, std::int64_t out,
                                 const float* dy, const float* x, float* dW) {
  if (dryrun::skip_kernel(gemm_flops(out, in, rows), static_cast<double>(rows * (in + out)) / 2))
    return;
  const std::int64_t ld_in = std::max<std::int64_t>(1, in), ld_out = std::max<std::int64_t>(1, out);
  check_gemm_shape("linear_backward_weight", Trans::T, Trans::N, out, in, rows, ld_out, ld_in,
                   ld_in);
  if (rows == 0 || in == 0 || out == 0) return;
  thread_local std::vector<bf16> dyb, xb;
  const std::int64_t kb = block_rows(in + out, 2, rows);
  dyb.resize(static_cast<std::size_t>(kb * out));
  xb.resize(static_cast<std::size_t>(kb * in));
  for (std::int64_t r0 = 0; r0 < rows; r0 += kb) {
    const std::int64_t k = std::min(kb, rows - r0);
    convert_to_bf16(k * out, dy + r0 * out, dyb.data());
    convert_to_bf16(k * in, x + r0 * in, xb.data());
    gemm_bf16(Trans::T, Trans::N, out, in, k, 1.0f, dyb.data(), ld_out, xb.data(), ld_in, 1.0f,
              dW, ld_in);
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
