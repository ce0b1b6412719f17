// libFuzzer target for the token file readers (docs/data.md): an Origami .index + .tokens
// pair, a Megatron .idx + .bin pair, or one flat / llm.c .bin, all from one input. Any input
// must either open with its invariants holding or throw origami::ConfigError; a crash, a
// sanitizer report or any other exception is a bug. Input: byte 0 picks the format, bytes
// 1..4 (little-endian) the length of the first file, the rest the two files.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "origami/core/error.h"
#include "origami/data/foreign_token_files.h"
#include "origami/data/token_file.h"

namespace {

void write(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void check(bool ok) {
  if (!ok) std::abort();  // an invariant the reader promised does not hold
}

void check_tokens(const origami::data::TokenView& t, std::int64_t vocab) {
  for (std::int64_t i = 0; i < t.count; ++i) check(t.at(i) >= 0 && t.at(i) < vocab);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  static const std::string base = "/tmp/origami_token_fuzz_" + std::to_string(::getpid());
  std::uint32_t first = 0;
  std::memcpy(&first, data + 1, 4);
  const std::uint8_t* rest = data + 5;
  const std::size_t left = size - 5;
  first = static_cast<std::uint32_t>(first % (left + 1));
  namespace data_ns = origami::data;
  try {
    switch (data[0] % 3) {
      case 0: {
        write(base + ".index", rest, first);
        write(base + ".tokens", rest + first, left - first);
        const data_ns::TokenFile f = data_ns::open_token_file(base);
        check(f.document_offset(0) == 0 && f.document_offset(f.documents()) == f.tokens.count);
        for (std::int64_t d = 0; d < f.documents(); ++d)
          check(f.document_offset(d) < f.document_offset(d + 1));
        check_tokens(f.tokens, f.vocab_size);
        break;
      }
      case 1: {
        write(base + ".idx", rest, first);
        write(base + ".bin", rest + first, left - first);
        const data_ns::ForeignTokenFile f = data_ns::open_megatron_dataset(base);
        check(f.tokens.count > 0 && f.documents >= 1);
        check_tokens(f.tokens, std::int64_t{f.largest.id} + 1);
        break;
      }
      default: {
        write(base + ".bin", rest, left);
        const data_ns::ForeignTokenFile f =
            data_ns::open_flat_token_file(base + ".bin", first % 2 ? 4 : 2);
        check(f.tokens.count > 0);
        for (std::int64_t i = 0; i < f.tokens.count; ++i)
          check(static_cast<std::uint32_t>(f.tokens.at(i)) <= f.largest.id);
      }
    }
  } catch (const origami::ConfigError&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
