// Element-wise combination of two arrays, acc = op(acc, in): the kernels of the communicator's
// reductions, and a plain sum (comm/reduce_op.cpp), on Highway vectors, compiled for every SIMD
// target and dispatched at run time (kernels/simd.h). One thread (the caller's); element-wise, so
// the result does not depend on the target or on how an array is cut. n >= 0.
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {

// acc[i] += in[i] for i < n (integers wrap around as two's complement).
void add_into(std::int64_t n, float* acc, const float* in);
void add_into(std::int64_t n, double* acc, const double* in);
void add_into(std::int64_t n, std::int32_t* acc, const std::int32_t* in);
void add_into(std::int64_t n, std::int64_t* acc, const std::int64_t* in);

// acc[i] = bf16(float(acc[i]) + float(in[i])) for i < n: the sum in fp32, rounded once to
// nearest even (core/bf16.h) — each hop of a bf16 reduction (comm/reduce_op.cpp), and a fp32
// gradient added into a bf16 gradient buffer (model/gradient_staging.h).
void add_into(std::int64_t n, bf16* acc, const bf16* in);
void add_into(std::int64_t n, bf16* acc, const float* in);

// acc[i] = in[i] > acc[i] ? in[i] : acc[i] for i < n: a NaN already in acc stays, a NaN in `in`
// leaves acc as it is.
void max_into(std::int64_t n, float* acc, const float* in);
void max_into(std::int64_t n, double* acc, const double* in);
void max_into(std::int64_t n, std::int32_t* acc, const std::int32_t* in);
void max_into(std::int64_t n, std::int64_t* acc, const std::int64_t* in);

// The sum of x[0..n), on four vector accumulators of the widest target (SumOver in
// vec_math-inl.h: the order depends on n and the target only). What the memory-read probe
// streams (cli/machine_peak.h): one core issuing full-width loads on independent chains, as
// the decode products do, rather than a probe limited by its own adds.
float sum(std::int64_t n, const float* x);

}  // namespace origami::kernels
