// Origami's token files (docs/data.md): PREFIX.tokens holds every document's ids back to back,
// little-endian uint16 when the vocabulary fits (<= 65536 ids) else uint32; PREFIX.index holds
// a 48-byte header and the documents' offsets:
//
//   offset  size  field
//        0     8  magic "ORGTOKIX"
//        8     4  version (1)
//       12     4  bytes per token (2 or 4)
//       16     8  vocabulary size V (every id is below it)
//       24     8  tokenizer identity (fnv1a64 of the tokenizer file's bytes; of "byte" for the
//                 byte tokenizer)
//       32     8  documents D (>= 1)
//       40     8  tokens N
//       48  8(D+1) document offsets, in tokens: 0 = o[0] < o[1] < ... < o[D] = N
//
// All integers little-endian. The reader maps both files and checks everything up front.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "origami/data/token_view.h"
#include "origami/io/mapped_file.h"

namespace origami::data {

inline constexpr char kTokenIndexMagic[8] = {'O', 'R', 'G', 'T', 'O', 'K', 'I', 'X'};
inline constexpr std::uint32_t kTokenIndexVersion = 1;
inline constexpr std::int64_t kTokenIndexHeaderBytes = 48;

// 2 when every id of a vocabulary of `vocab_size` fits in uint16, else 4.
int token_width(std::int64_t vocab_size);

// Streams documents to PREFIX.tokens.tmp and PREFIX.index.tmp; finish() writes the index and
// renames both into place, so an interrupted run leaves no file that looks complete.
class TokenFileWriter {
 public:
  TokenFileWriter(std::string prefix, std::int64_t vocab_size, std::uint64_t tokenizer_id);
  ~TokenFileWriter();  // removes the temporary files unless finish() ran
  // Appends one document; an empty one or an id outside the vocabulary is a ConfigError.
  void add_document(std::span<const std::int32_t> ids);
  void finish();
  std::int64_t documents() const { return static_cast<std::int64_t>(offsets_.size()) - 1; }
  std::int64_t tokens() const { return offsets_.back(); }

 private:
  std::string prefix_;
  std::int64_t vocab_size_;
  std::uint64_t tokenizer_id_;
  int width_;
  std::ofstream tokens_;
  std::vector<std::int64_t> offsets_{0};
  std::vector<std::uint8_t> buffer_;
  bool finished_ = false;
};

// A token file read by memory map, every field validated.
struct TokenFile {
  std::shared_ptr<const io::MappedFile> tokens_file, index_file;
  TokenView tokens;
  std::int64_t vocab_size = 0;
  std::uint64_t tokenizer_id = 0;
  std::span<const std::uint8_t> offsets;  // D + 1 little-endian uint64 (see document_offset)
  std::int64_t documents() const { return static_cast<std::int64_t>(offsets.size() / 8) - 1; }
  std::int64_t document_offset(std::int64_t d) const;
};

// Opens PREFIX.tokens and PREFIX.index. Each defect is a ConfigError naming the file and the
// byte offset: a short header, a bad magic, version or width, a size that disagrees with the
// header, an offset out of order (a zero-length document included) or past the tokens, and a
// token id >= the vocabulary (checked up front: one sequential pass, so that a bad id stops the
// run before its first step rather than hours into it).
TokenFile open_token_file(const std::string& prefix);

// Whether PREFIX.index exists (the --data spec's test for this format).
bool is_token_file_prefix(const std::string& prefix);

}  // namespace origami::data
