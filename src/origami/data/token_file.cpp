#include "origami/data/token_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::data {

namespace {

constexpr std::int64_t kMaxVocab = std::int64_t{1} << 31;  // ids are read as int32

std::uint64_t read_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
std::uint32_t read_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void put(std::vector<std::uint8_t>& out, const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}


}  // namespace

int token_width(std::int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenFileWriter::TokenFileWriter(std::string prefix, std::int64_t vocab_size,
                                 std::uint64_t tokenizer_id)
    : prefix_(std::move(prefix)),
      vocab_size_(vocab_size),
      tokenizer_id_(tokenizer_id),
      width_(token_width(vocab_size)) {
  if (vocab_size < 1 || vocab_size > kMaxVocab)
    throw ConfigError(fmt::format("token file: vocabulary size {} is outside 1 .. 2^31",
                                  vocab_size));
  const std::string path = prefix_ + ".tokens.tmp";
  tokens_.open(path, std::ios::binary | std::ios::trunc);
  if (!tokens_)
    throw ConfigError(fmt::format("--out: cannot write '{}': {}", path, std::strerror(errno)));
}

TokenFileWriter::~TokenFileWriter() {
  if (finished_) return;
  tokens_.close();
  std::error_code ignored;
  std::filesystem::remove(prefix_ + ".tokens.tmp", ignored);
  std::filesystem::remove(prefix_ + ".index.tmp", ignored);
}

void TokenFileWriter::add_document(std::span<const std::int32_t> ids) {
  if (ids.empty())
    throw ConfigError(fmt::format("token file '{}': document {} has no tokens", prefix_,
                                  documents()));
  buffer_.clear();
  buffer_.reserve(ids.size() * static_cast<std::size_t>(width_));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_)
      throw ConfigError(fmt::format("token file '{}': id {} (token {} of document {}) is outside "
                                    "the vocabulary of {}",
                                    prefix_, ids[i], i, documents(), vocab_size_));
    if (width_ == 2) {
      const auto v = static_cast<std::uint16_t>(ids[i]);
      put(buffer_, &v, 2);
    } else {
      const auto v = static_cast<std::uint32_t>(ids[i]);
      put(buffer_, &v, 4);
    }
  }
  tokens_.write(reinterpret_cast<const char*>(buffer_.data()),
                static_cast<std::streamsize>(buffer_.size()));
  offsets_.push_back(offsets_.back() + static_cast<std::int64_t>(ids.size()));
}

void TokenFileWriter::finish() {
  if (documents() == 0)
    throw ConfigError(fmt::format("token file '{}': no documents to write", prefix_));
  tokens_.flush();
  tokens_.close();
  if (!tokens_)
    throw ConfigError(fmt::format("--out: writing '{}.tokens.tmp' failed: {}", prefix_,
                                  std::strerror(errno)));
  std::vector<std::uint8_t> index;
  put(index, kTokenIndexMagic, 8);
  const std::uint32_t version = kTokenIndexVersion, width = static_cast<std::uint32_t>(width_);
  const auto vocab = static_cast<std::uint64_t>(vocab_size_);
  const auto docs = static_cast<std::uint64_t>(documents());
  const auto n = static_cast<std::uint64_t>(tokens());
  put(index, &version, 4);
  put(index, &width, 4);
  put(index, &vocab, 8);
  put(index, &tokenizer_id_, 8);
  put(index, &docs, 8);
  put(index, &n, 8);
  for (const std::int64_t o : offsets_) {
    const auto v = static_cast<std::uint64_t>(o);
    put(index, &v, 8);
  }
  const std::string tmp = prefix_ + ".index.tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(index.data()), static_cast<std::streamsize>(index.size()));
    out.close();
    if (!out)
      throw ConfigError(fmt::format("--out: writing '{}' failed: {}", tmp, std::strerror(errno)));
  }
  // The tokens first: an index in place always has its tokens beside it.
  std::filesystem::rename(prefix_ + ".tokens.tmp", prefix_ + ".tokens");
  std::filesystem::rename(tmp, prefix_ + ".index");
  finished_ = true;
}

std::int64_t TokenFile::document_offset(std::int64_t d) const {
  return static_cast<std::int64_t>(read_u64(offsets.data() + 8 * d));
}

bool is_token_file_prefix(const std::string& prefix) {
  std::error_code ec;
  return std::filesystem::is_regular_file(prefix + ".index", ec);
}

TokenFile open_token_file(const std::string& prefix) {
  TokenFile f;
  const std::string index_path = prefix + ".index", tokens_path = prefix + ".tokens";
  f.index_file = std::make_shared<io::MappedFile>(index_path, "--data");
  f.tokens_file = std::make_shared<io::MappedFile>(tokens_path, "--data");
  const std::span<const std::uint8_t> ix = f.index_file->bytes();
  if (ix.size() < static_cast<std::size_t>(kTokenIndexHeaderBytes))
    refuse_token_file(index_path, ix.size(),
           fmt::format("the file ends inside the {}-byte header (truncated?)",
                       kTokenIndexHeaderBytes));
  if (std::memcmp(ix.data(), kTokenIndexMagic, 8) != 0)
    refuse_token_file(index_path, 0, "no 'ORGTOKIX' magic: not an Origami token index");
  const std::uint32_t version = read_u32(ix.data() + 8);
  if (version != kTokenIndexVersion)
    refuse_token_file(index_path, 8, fmt::format("version {} (this Origami reads version {})", version,
                                      kTokenIndexVersion));
  const std::uint32_t width = read_u32(ix.data() + 12);
  if (width != 2 && width != 4)
    refuse_token_file(index_path, 12, fmt::format("{} bytes per token (2 or 4 are defined)", width));
  const std::uint64_t vocab = read_u64(ix.data() + 16);
  if (vocab < 1 || vocab > static_cast<std::uint64_t>(kMaxVocab) ||
      (width == 2 && vocab > 65536))
    refuse_token_file(index_path, 16,
           fmt::format("vocabulary size {} does not fit {}-byte tokens (1 .. {})", vocab, width,
                       width == 2 ? 65536 : kMaxVocab));
  f.vocab_size = static_cast<std::int64_t>(vocab);
  f.tokenizer_id = read_u64(ix.data() + 24);
  const std::uint64_t docs = read_u64(ix.data() + 32);
  const std::uint64_t n = read_u64(ix.data() + 40);
  const std::uint64_t max_docs = (ix.size() - kTokenIndexHeaderBytes) / 8;  // bounds the product
  if (docs == 0) refuse_token_file(index_path, 32, "0 documents");
  const std::uint64_t table = ix.size() - kTokenIndexHeaderBytes;
  if (table % 8 != 0 || max_docs == 0 || docs != max_docs - 1)
    refuse_token_file(index_path, ix.size(),
           fmt::format("the header says {} documents, so {} offsets of 8 bytes after the header, "
                       "but the file holds {} bytes there (truncated or extended?)",
                       docs, docs < max_docs ? fmt::format("{}", docs + 1) : "that many + 1",
                       table));
  const std::uint64_t token_bytes = f.tokens_file->size();
  if (token_bytes % width != 0 || token_bytes / width != n)
    refuse_token_file(tokens_path, std::min<std::uint64_t>(token_bytes, n * width),
           fmt::format("the index ('{}') says {} tokens of {} bytes, {} bytes, but the file has "
                       "{} (truncated?)",
                       index_path, n, width, n * width, token_bytes));
  f.offsets = ix.subspan(kTokenIndexHeaderBytes);
  std::uint64_t prev = 0;
  for (std::uint64_t d = 0; d <= docs; ++d) {
    const std::uint64_t at = kTokenIndexHeaderBytes + 8 * d;
    const std::uint64_t o = read_u64(ix.data() + at);
    if (d == 0 && o != 0) refuse_token_file(index_path, at, fmt::format("the first offset is {}, not 0", o));
    if (d > 0 && o <= prev)
      refuse_token_file(index_path, at,
             fmt::format("offset {} of document {} is not above the previous one, {}{}", o, d - 1,
                         prev, o == prev ? " (a zero-length document)" : " (out of order)"));
    if (o > n)
      refuse_token_file(index_path, at,
             fmt::format("offset {} points past the {} tokens of '{}'", o, n, tokens_path));
    prev = o;
  }
  if (prev != n)
    refuse_token_file(index_path, kTokenIndexHeaderBytes + 8 * docs,
           fmt::format("the last offset is {} but the file has {} tokens", prev, n));
  f.tokens = TokenView{f.tokens_file->bytes().data(), static_cast<int>(width),
                       static_cast<std::int64_t>(n)};
  const LargestId big = largest_id(f.tokens);
  if (big.at >= 0 && big.id >= vocab)
    refuse_token_file(tokens_path, static_cast<std::uint64_t>(big.at) * width,
           fmt::format("token id {} (token {}) is not below the vocabulary size {} of its index",
                       big.id, big.at, vocab));
  return f;
}

}  // namespace origami::data
