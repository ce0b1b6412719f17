// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11). A value is a pure
// function of (seed, stream name, index): no state, no order dependence. Parameter element
// i of tensor "model.layers.3.mlp.up_proj.weight" is normal(seed, name, i) * std whatever the
// layout, so a shard initialised on its own equals the same slice of the full tensor, bit for
// bit — the property every parity test rests on.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "origami/core/tensor.h"

namespace origami::rng {

using Counter = std::array<std::uint32_t, 4>;
using Key = std::array<std::uint32_t, 2>;

Counter philox4x32_10(Counter counter, Key key);

// 64-bit FNV-1a of a stream name.
std::uint64_t hash_name(std::string_view name);

// Key of a (seed, stream) pair.
Key make_key(std::uint64_t seed, std::string_view stream);

// Uniform in (0, 1) for element `index` of the stream (never exactly 0 or 1).
double uniform(Key key, std::uint64_t index);
// Standard normal for element `index` of the stream (Box-Muller on one Philox block).
double normal(Key key, std::uint64_t index);

// Fills `block` (any rank, row-major) with std * normal(seed, name, global index), where the
// block sits at `offsets` inside a tensor of `global_shape`. With offsets all zero and
// global_shape == block.shape() it initialises a whole tensor.
void fill_normal_block(Tensor& block, std::uint64_t seed, std::string_view name,
                       const Shape& global_shape, const Shape& offsets, double stddev);

}  // namespace origami::rng
