#include "origami/data/permutation.h"

#include "origami/core/error.h"

namespace origami::data {

namespace {

// One bijection of [0, 4^half_bits): four Feistel rounds on two halves of half_bits bits.
std::uint64_t feistel(std::uint64_t x, int half_bits, rng::Key key) {
  const std::uint64_t mask = (std::uint64_t{1} << half_bits) - 1;
  std::uint64_t left = x >> half_bits, right = x & mask;
  for (std::uint32_t round = 0; round < 4; ++round) {
    const rng::Counter c = rng::philox4x32_10(
        {static_cast<std::uint32_t>(right), static_cast<std::uint32_t>(right >> 32), round, 0},
        key);
    const std::uint64_t f = (std::uint64_t{c[1]} << 32 | c[0]) & mask;
    const std::uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return left << half_bits | right;
}

}  // namespace

std::uint64_t permute(std::uint64_t index, std::uint64_t n, rng::Key key) {
  ORIGAMI_CHECK(index < n, "permute: index {} of a permutation of {}", index, n);
  int half_bits = 1;
  while (half_bits < 31 && (std::uint64_t{1} << (2 * half_bits)) < n) ++half_bits;
  ORIGAMI_CHECK((std::uint64_t{1} << (2 * half_bits)) >= n, "permute: {} elements", n);
  std::uint64_t x = index;
  do x = feistel(x, half_bits, key);
  while (x >= n);  // cycle walking: the orbit of an index < n returns below n
  return x;
}

}  // namespace origami::data
