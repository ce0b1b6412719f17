// Element-wise combination of two arrays, acc = op(acc, in): the kernels of the communicator's
// reductions (comm/reduce_op.cpp), on Highway vectors, compiled for every SIMD target and
// dispatched at run time (kernels/simd.h). One thread (the caller's); element-wise, so the
// result does not depend on the target or on how an array is cut. n >= 0.
#pragma once

#include <cstdint>

namespace origami::kernels {

// acc[i] += in[i] for i < n (integers wrap around as two's complement).
void add_into(std::int64_t n, float* acc, const float* in);
void add_into(std::int64_t n, double* acc, const double* in);
void add_into(std::int64_t n, std::int32_t* acc, const std::int32_t* in);
void add_into(std::int64_t n, std::int64_t* acc, const std::int64_t* in);

// acc[i] = in[i] > acc[i] ? in[i] : acc[i] for i < n: a NaN already in acc stays, a NaN in `in`
// leaves acc as it is.
void max_into(std::int64_t n, float* acc, const float* in);
void max_into(std::int64_t n, double* acc, const double* in);
void max_into(std::int64_t n, std::int32_t* acc, const std::int32_t* in);
void max_into(std::int64_t n, std::int64_t* acc, const std::int64_t* in);

}  // namespace origami::kernels
