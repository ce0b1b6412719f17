#include "origami/data/foreign_token_files.h"

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::data {

namespace {

template <typename T>
T read_le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}


// The tokens of `file` from byte `start` on, as ids of `width` bytes.
TokenView tokens_after(const io::MappedFile& file, std::size_t start, int width) {
  const std::size_t bytes = file.size() - start;
  if (bytes % static_cast<std::size_t>(width) != 0)
    refuse_token_file(file.path(), file.size() - bytes % static_cast<std::size_t>(width),
           fmt::format("{} bytes of ids is not a whole number of {}-byte tokens (truncated?)",
                       bytes, width));
  return {file.bytes().data() + start, width, static_cast<std::int64_t>(bytes) / width};
}

void require_tokens(const ForeignTokenFile& f, const std::string& path) {
  if (f.tokens.count == 0) refuse_token_file(path, 0, "the file holds no tokens");
}

}  // namespace

ForeignTokenFile open_flat_token_file(const std::string& path, int width) {
  if (width != 2 && width != 4)
    throw ConfigError(fmt::format("--data-dtype: {} bytes per token; use uint16 or uint32", width));
  ForeignTokenFile f;
  f.storage = std::make_shared<io::MappedFile>(path, "--data");
  const io::MappedFile& file = *f.storage;
  const std::uint8_t* b = file.bytes().data();
  const std::size_t header = kLlmcHeaderInts * 4;
  const std::int32_t magic = file.size() >= 4 ? read_le<std::int32_t>(b) : 0;
  if (magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3) {
    if (file.size() < header)
      refuse_token_file(path, file.size(), "the llm.c header (256 int32) is cut short (truncated?)");
    const std::int32_t version = read_le<std::int32_t>(b + 4);
    const std::int32_t expected = magic == kLlmcMagicGpt2 ? 1 : 7;
    if (version != expected)
      refuse_token_file(path, 4, fmt::format("llm.c magic {} with version {} (expected {})", magic, version,
                                  expected));
    const int w = magic == kLlmcMagicGpt2 ? 2 : 4;
    const std::int64_t count = read_le<std::int32_t>(b + 8);
    f.format = w == 2 ? "llm.c .bin (uint16)" : "llm.c .bin (uint32)";
    f.tokens = tokens_after(file, header, w);
    if (count < 0 || count != f.tokens.count)
      refuse_token_file(path, 8, fmt::format("the header says {} tokens but the file holds {} after it "
                                  "(truncated?)",
                                  count, f.tokens.count));
  } else {
    f.format = width == 2 ? "flat uint16" : "flat uint32";
    f.tokens = tokens_after(file, 0, width);
  }
  require_tokens(f, path);
  f.largest = largest_id(f.tokens);
  return f;
}

bool is_megatron_prefix(const std::string& prefix) {
  std::error_code ec;
  return std::filesystem::is_regular_file(prefix + ".idx", ec) &&
         std::filesystem::is_regular_file(prefix + ".bin", ec);
}

ForeignTokenFile open_megatron_dataset(const std::string& prefix) {
  static constexpr std::uint8_t kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  static constexpr std::uint64_t kHead = 9 + 8 + 1 + 8 + 8;  // 34 bytes
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  const io::MappedFile idx(idx_path, "--data");
  ForeignTokenFile f;
  f.storage = std::make_shared<io::MappedFile>(bin_path, "--data");
  const std::uint8_t* p = idx.bytes().data();
  const std::uint64_t size = idx.size();
  if (size < kHead) refuse_token_file(idx_path, size, "the file ends inside the 34-byte header (truncated?)");
  if (std::memcmp(p, kMagic, 9) != 0)
    refuse_token_file(idx_path, 0, "no 'MMIDIDX' magic: not a Megatron indexed dataset");
  const auto version = read_le<std::uint64_t>(p + 9);
  if (version != 1) refuse_token_file(idx_path, 9, fmt::format("version {} (version 1 is read)", version));
  const std::uint8_t code = p[17];
  int width = 0;
  if (code == 8) width = 2;       // uint16
  else if (code == 4) width = 4;  // int32
  else
    refuse_token_file(idx_path, 17,
           fmt::format("dtype code {}: token ids are read as uint16 (code 8) or int32 (code 4), "
                       "what Megatron's preprocessing writes",
                       code));
  const auto sequences = read_le<std::uint64_t>(p + 18);
  const auto doc_entries = read_le<std::uint64_t>(p + 26);
  // The sizes before their product: a corrupted count cannot overflow the arithmetic below.
  const std::uint64_t room = size - kHead;
  if (sequences > room / 12 || doc_entries > room / 8)
    refuse_token_file(idx_path, 18, fmt::format("{} sequences and {} document indices do not fit the {} "
                                     "bytes of the file",
                                     sequences, doc_entries, size));
  const std::uint64_t lengths_at = kHead, pointers_at = lengths_at + 4 * sequences,
                      docs_at = pointers_at + 8 * sequences, end = docs_at + 8 * doc_entries;
  if (end != size && end + sequences != size)  // the optional sequence modes
    refuse_token_file(idx_path, std::min(end, size),
           fmt::format("{} sequences and {} document indices make a file of {} bytes (or {} "
                       "with sequence modes), but it has {} (truncated?)",
                       sequences, doc_entries, end, end + sequences, size));
  if (sequences == 0) refuse_token_file(idx_path, 18, "0 sequences");
  const std::uint64_t bin_size = f.storage->size();
  std::uint64_t expected_pointer = 0;
  for (std::uint64_t s = 0; s < sequences; ++s) {
    const auto length = read_le<std::int32_t>(p + lengths_at + 4 * s);
    const auto pointer = read_le<std::int64_t>(p + pointers_at + 8 * s);
    if (length <= 0)
      refuse_token_file(idx_path, lengths_at + 4 * s,
             fmt::format("sequence {} has length {}{}", s, length,
                         length == 0 ? " (a zero-length document)" : ""));
    if (pointer < 0 || static_cast<std::uint64_t>(pointer) != expected_pointer)
      refuse_token_file(idx_path, pointers_at + 8 * s,
             fmt::format("sequence {} starts at byte {} of '{}', not right after the previous "
                         "one (byte {}): the sequences must be stored back to back",
                         s, pointer, bin_path, expected_pointer));
    expected_pointer += static_cast<std::uint64_t>(length) * static_cast<std::uint64_t>(width);
    if (expected_pointer > bin_size)
      refuse_token_file(idx_path, lengths_at + 4 * s,
             fmt::format("sequence {} ends at byte {}, past the end of '{}' ({} bytes)", s,
                         expected_pointer, bin_path, bin_size));
  }
  if (expected_pointer != bin_size)
    refuse_token_file(bin_path, expected_pointer,
           fmt::format("the index covers {} bytes but the file has {}", expected_pointer,
                       bin_size));
  if (doc_entries < 2) refuse_token_file(idx_path, 26, fmt::format("{} document indices (at least 2: 0 and "
                                                        "the sequence count)",
                                                        doc_entries));
  std::int64_t prev = -1;
  for (std::uint64_t d = 0; d < doc_entries; ++d) {
    const auto v = read_le<std::int64_t>(p + docs_at + 8 * d);
    const bool ok = d == 0 ? v == 0 : (v > prev && static_cast<std::uint64_t>(v) <= sequences);
    if (!ok)
      refuse_token_file(idx_path, docs_at + 8 * d,
             fmt::format("document index {} is {}: the indices run 0 < ... < {} (the sequence "
                         "count), each above the last",
                         d, v, sequences));
    prev = v;
  }
  if (static_cast<std::uint64_t>(prev) != sequences)
    refuse_token_file(idx_path, docs_at + 8 * (doc_entries - 1),
           fmt::format("the last document index is {}, not the sequence count {}", prev,
                       sequences));
  f.format = width == 2 ? "Megatron indexed (uint16)" : "Megatron indexed (int32)";
  f.tokens = TokenView{f.storage->bytes().data(), width,
                       static_cast<std::int64_t>(bin_size) / width};
  f.documents = static_cast<std::int64_t>(doc_entries) - 1;
  // Sequences lie back to back (checked above): a document starts at its first sequence's
  // byte pointer.
  for (std::uint64_t d = 0; d + 1 < doc_entries; ++d) {
    const auto first = static_cast<std::uint64_t>(read_le<std::int64_t>(p + docs_at + 8 * d));
    f.document_offsets.push_back(read_le<std::int64_t>(p + pointers_at + 8 * first) / width);
  }
  f.document_offsets.push_back(f.tokens.count);
  f.largest = largest_id(f.tokens);
  if (width == 4 && f.largest.id > 0x7fffffffu)  // int32 ids read as unsigned: a negative id
    refuse_token_file(bin_path, static_cast<std::uint64_t>(f.largest.at) * 4,
           fmt::format("token {} is negative ({})", f.largest.at,
                       static_cast<std::int32_t>(f.largest.id)));
  return f;
}

}  // namespace origami::data
