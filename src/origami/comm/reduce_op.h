// Reduction operators and their element-wise kernels. A collective sees a reduction as a
// Reducer: an element size and a combine function, so the algorithms are written once over
// bytes. Sum and Max work for F32, F64, I32 and I64; BF16 has Sum only (each combine adds in
// fp32 and rounds to nearest even once); F16 moves as bytes only. Max-with-index packs each element as {double value, int64 index} (16 bytes):
// the larger value wins, ties go to the smaller index (a deterministic distributed argmax).
#pragma once

#include <cstdint>
#include <string_view>

#include "origami/core/dtype.h"

namespace origami::comm {

enum class ReduceOp : std::uint8_t { Sum, Max };

std::string_view reduce_op_name(ReduceOp op);

// One packed element of a max-with-index reduction.
struct ValueIndex {
  double value;
  std::int64_t index;
};

namespace detail {

struct Reducer {
  std::int64_t elem_bytes = 0;
  // acc[i] = op(acc[i], in[i]) for i in [0, n).
  void (*combine)(void* acc, const void* in, std::int64_t n) = nullptr;
};

// Throws origami::Error naming the dtype if the reduction is not supported for it.
Reducer make_reducer(ReduceOp op, DType dtype);
Reducer maxloc_reducer();

}  // namespace detail
}  // namespace origami::comm
