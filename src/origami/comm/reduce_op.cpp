#include "origami/comm/reduce_op.h"

#include "origami/core/error.h"
#include "origami/kernels/reduce.h"

namespace origami::comm {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

namespace detail {
namespace {

// The element-wise kernels are the SIMD ones of kernels/reduce.h (pure compute on raw
// pointers; comm depends on kernels, never the reverse).
template <class T>
void sum_kernel(void* acc, const void* in, std::int64_t n) {
  if (acc == nullptr || in == nullptr) return;  // an unbacked dry-run buffer
  kernels::add_into(n, static_cast<T*>(acc), static_cast<const T*>(in));
}

template <class T>
void max_kernel(void* acc, const void* in, std::int64_t n) {
  if (acc == nullptr || in == nullptr) return;  // an unbacked dry-run buffer
  kernels::max_into(n, static_cast<T*>(acc), static_cast<const T*>(in));
}

// bf16 sums: each combine adds in fp32 and rounds once (kernels/reduce.h), so a reduction over
// p ranks rounds p - 1 times along its order (gradients under --grad-reduce-dtype bf16).
void bf16_sum_kernel(void* acc, const void* in, std::int64_t n) {
  if (acc == nullptr || in == nullptr) return;  // an unbacked dry-run buffer
  kernels::add_into(n, static_cast<bf16*>(acc), static_cast<const bf16*>(in));
}

void maxloc_kernel(void* acc, const void* in, std::int64_t n) {
  if (acc == nullptr || in == nullptr) return;
  auto* a = static_cast<ValueIndex*>(acc);
  const auto* b = static_cast<const ValueIndex*>(in);
  for (std::int64_t i = 0; i < n; ++i) {
    if (b[i].value > a[i].value || (b[i].value == a[i].value && b[i].index < a[i].index)) a[i] = b[i];
  }
}

template <class T>
Reducer typed(ReduceOp op) {
  return {static_cast<std::int64_t>(sizeof(T)), op == ReduceOp::Sum ? &sum_kernel<T> : &max_kernel<T>};
}

}  // namespace

Reducer make_reducer(ReduceOp op, DType dtype) {
  switch (dtype) {
    case DType::F32: return typed<float>(op);
    case DType::F64: return typed<double>(op);
    case DType::I32: return typed<std::int32_t>(op);
    case DType::I64: return typed<std::int64_t>(op);
    case DType::BF16:
      if (op == ReduceOp::Sum) return {2, &bf16_sum_kernel};
      break;
    case DType::F16: break;
  }
  ORIGAMI_CHECK(false, "reduction '{}' is not supported for dtype {} (reduce in F32 or F64, or "
                "sum in BF16; {} buffers can otherwise only be moved, e.g. broadcast or all_gather)",
                reduce_op_name(op), dtype_name(dtype), dtype_name(dtype));
  return {};
}

Reducer maxloc_reducer() { return {static_cast<std::int64_t>(sizeof(ValueIndex)), &maxloc_kernel}; }

}  // namespace detail
}  // namespace origami::comm
