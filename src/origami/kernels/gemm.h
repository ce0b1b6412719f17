// Matrix products, behind one small interface so the library doing them (oneDNN today, chosen
// by measurement: see docs/results-kernels.md) can change without touching a caller.
#pragma once

#include <cstdint>
#include <string>

#include "origami/core/bf16.h"
#include "origami/kernels/weight_view.h"

namespace origami::kernels {

enum class Trans : char { N = 'N', T = 'T' };

// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, all row-major with leading dimensions
// lda/ldb/ldc (elements between consecutive rows of the stored matrix). With beta = 0, C need
// not be initialised. M, N or K may be 0.
void gemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
          float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
          float beta, float* C, std::int64_t ldc);

// The same product with bf16 A and B (fp32 C, fp32 accumulation): oneDNN's bf16 matmul where
// this CPU has a real kernel for it, else blocks widened to fp32 and sgemm (gemm_bf16.cpp).
void gemm_bf16(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               float alpha, const bf16* A, std::int64_t lda, const bf16* B, std::int64_t ldb,
               float beta, float* C, std::int64_t ldc);

// Which of the two paths bf16 products take on this machine, in words ("native (oneDNN
// brg:avx512_core_bf16)" or "converting (...)"): printed once by the programs.
std::string gemm_bf16_path();

// Whether bf16 products run on oneDNN's bf16 matmul here (the CPU has bf16 dot products and
// the converting path is not forced): what linear_forward chooses its bf16 path by.
bool gemm_bf16_native();

// Tests and benchmarks: makes every later bf16 product take the converting path (or not), and
// linear_forward's bf16 weights the widening path. Not thread-safe against products running
// at the same time.
void force_gemm_bf16_conversion(bool on);

namespace detail {
// The checks both products make first (ORIGAMI_CHECK naming `name`): sizes >= 0 and leading
// dimensions covering the stored matrices' columns.
void check_gemm_shape(const char* name, Trans trans_a, Trans trans_b, std::int64_t M,
                      std::int64_t N, std::int64_t K, std::int64_t lda, std::int64_t ldb,
                      std::int64_t ldc);
// linear_forward on a bf16 W, and the two backward products of a linear computing in bf16
// (linear_bf16.cpp).
void linear_forward_bf16(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                         const bf16* W, float* y, bool accumulate);
void linear_backward_input_bf16(std::int64_t rows, std::int64_t in, std::int64_t out,
                                const float* dy, const bf16* W, float* dx);
void linear_backward_weight_bf16(std::int64_t rows, std::int64_t in, std::int64_t out,
                                 const float* dy, const float* x, float* dW);
}  // namespace detail

// Floating-point operations of one such product: 2*M*N*K.
inline double gemm_flops(std::int64_t M, std::int64_t N, std::int64_t K) {
  return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
}

// Linear layer with a weight stored as torch/Hugging Face do, [out, in]:
//   forward      y[rows,out]  (=|+=) x[rows,in] @ W^T
//   backward dx  dx[rows,in]  += dy[rows,out] @ W
//   backward dW  dW[out,in]   += dy^T @ x
// `accumulate` selects += for the forward output (partial sums over weight shards).
// A bf16 W (inference's bf16 prefill, training's bf16 compute copy) takes one of two paths,
// chosen per CPU (linear_bf16.cpp):
//   native     where gemm_bf16_native(): x rounded to bf16 (one rounding, 2^-8 relative, of
//              each activation, as llama.cpp's BF16 path does) and gemm_bf16, bf16 x bf16 with
//              fp32 accumulation into fp32 y;
//   widening   elsewhere: blocks of W's rows widened exactly to fp32 and the fp32 gemm on the
//              fp32 x (oneDNN's bf16 matmul has no fast kernel there: docs/results-kernels.md).
void linear_forward(std::int64_t rows, std::int64_t in, std::int64_t out, const float* x,
                    WeightView W, float* y, bool accumulate = false);
// Which of the two a bf16 W takes here, in words, with gemm_bf16_path()'s reason: printed once
// by the programs that run the bf16 prefill.
std::string linear_forward_bf16_path();
// The backward products of a linear that computes in bf16 (training under --precision bf16,
// core/precision.h: W is then the bf16 compute copy of the fp32 master) take the same two paths
// as its forward, so that a linear's three products round the same operands:
//   native     dy (and, for dW, x) rounded to bf16 and gemm_bf16, fp32 accumulation into the
//              fp32 dx / dW;
//   widening   dx: blocks of W widened exactly and the fp32 gemm on the fp32 dy; dW: the fp32
//              gemm on the fp32 dy and x (nothing of dW's operands is a weight).
// `compute` is the dtype the linear computes in: its W's (WeightView::dtype()).
void linear_backward_input(std::int64_t rows, std::int64_t in, std::int64_t out, const float* dy,
                           WeightView W, float* dx);
void linear_backward_weight(std::int64_t rows, std::int64_t in, std::int64_t out, const float* dy,
                            const float* x, float* dW, DType compute = DType::F32);

}  // namespace origami::kernels
