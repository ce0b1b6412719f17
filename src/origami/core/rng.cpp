#include "origami/core/rng.h"

#include <cmath>
#include <numbers>

namespace origami::rng {

namespace {
constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi, std::uint32_t* lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  *hi = static_cast<std::uint32_t>(p >> 32);
  *lo = static_cast<std::uint32_t>(p);
}

// 2^-32 scaled so that the result lies strictly inside (0, 1).
inline double to_open_unit(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits53 = ((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11;
  return (static_cast<double>(bits53) + 0.5) * 0x1.0p-53;
}
}  // namespace

Counter philox4x32_10(Counter c, Key k) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], &hi0, &lo0);
    mulhilo(kMul1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::uint64_t hash_name(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

Key make_key(std::uint64_t seed, std::string_view stream) {
  // Mix the seed through one Philox block keyed by the name hash, so that nearby seeds and
  // similar names give unrelated keys.
  const std::uint64_t h = hash_name(stream);
  const Counter mixed = philox4x32_10(
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), 0x5EED5EEDu, 0u},
      {static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32)});
  return {mixed[0], mixed[1]};
}

double uniform(Key key, std::uint64_t index) {
  const Counter r = philox4x32_10(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u}, key);
  return to_open_unit(r[0], r[1]);
}

double normal(Key key, std::uint64_t index) {
  const Counter r = philox4x32_10(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u}, key);
  const double u1 = to_open_unit(r[0], r[1]);
  const double u2 = to_open_unit(r[2], r[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void fill_normal_block(Tensor& block, std::uint64_t seed, std::string_view name,
                       const Shape& global_shape, const Shape& offsets, double stddev) {
  const int n = block.ndim();
  ORIGAMI_CHECK(static_cast<int>(global_shape.size()) == n && static_cast<int>(offsets.size()) == n,
                "block of rank {} placed in global shape {} at offsets {}", n,
                shape_str(global_shape), shape_str(offsets));
  for (int i = 0; i < n; ++i) {
    ORIGAMI_CHECK(offsets[i] >= 0 && offsets[i] + block.dim(i) <= global_shape[i],
                  "block {} at offsets {} does not fit in {}", shape_str(block.shape()),
                  shape_str(offsets), shape_str(global_shape));
  }
  if (!block.backed() || block.numel() == 0) return;
  const Key key = make_key(seed, name);
  // Global row-major strides.
  std::vector<std::int64_t> stride(static_cast<std::size_t>(n), 1);
  for (int i = n - 2; i >= 0; --i) stride[i] = stride[i + 1] * global_shape[i + 1];
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n), 0);
  float* out = block.f32();
  for (std::int64_t e = 0; e < block.numel(); ++e) {
    std::int64_t g = 0;
    for (int i = 0; i < n; ++i) g += (offsets[i] + idx[i]) * stride[i];
    out[e] = static_cast<float>(stddev * normal(key, static_cast<std::uint64_t>(g)));
    for (int i = n - 1; i >= 0; --i) {  // odometer increment over the block
      if (++idx[i] < block.dim(i)) break;
      idx[i] = 0;
    }
  }
}

}  // namespace origami::rng
