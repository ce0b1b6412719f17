// FNV-1a 64 of a byte range: the checksum of checkpoint blocks, token files' tokenizer identity
// and the ranks' data fingerprints (not a cryptographic hash: it detects corruption and
// mismatches, not tampering).
#pragma once

#include <cstddef>
#include <cstdint>

namespace origami {

std::uint64_t fnv1a64(const void* data, std::size_t bytes);

}  // namespace origami
