// Element types. Kernels compute in fp32 today; storage, accounting and byte counts are
// already exact for bf16 and fp64 so that a bf16 profile can be measured (dry run) and
// computed later without changing any interface. F16 exists for reading Hugging Face
// checkpoints (converted to F32 on load, exactly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "origami/core/bf16.h"

namespace origami {

enum class DType : std::uint8_t { F32, BF16, F64, I32, I64, F16 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F16: return 2;
  }
  return 0;
}

// Names as safetensors spells them.
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F16: return "F16";
  }
  return "?";
}

// Parses a safetensors dtype name; returns false if unknown.
bool parse_dtype(std::string_view name, DType* out);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::F32; }
template <>
constexpr DType dtype_of<double>() { return DType::F64; }
template <>
constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <>
constexpr DType dtype_of<std::int64_t>() { return DType::I64; }
template <>
constexpr DType dtype_of<bf16>() { return DType::BF16; }

}  // namespace origami
