// `origami tokenize --input FILE --out PREFIX`: a corpus into an Origami token file
// (token_file.h), documents as docs/data.md states:
//   * FILE.jsonl: one JSON object per line, its "text" string one document (blank lines are
//     skipped; a line that is no JSON object with a string "text" is refused naming the line);
//   * any other FILE: text, documents separated by one or more blank lines (a file without
//     blank lines is one document); a document's text is its lines joined by "\n".
// Each document is followed by the tokenizer's eos when it has one, so that a window spanning
// two documents sees where one ends. A document of no tokens is skipped (and counted).
#pragma once

#include <cstdint>
#include <string>

#include "origami/tokenizer/tokenizer.h"

namespace origami::data {

struct CorpusStats {
  std::int64_t documents = 0, skipped = 0, tokens = 0, bytes = 0;  // bytes of document text
  int width = 2;           // bytes per token written
  double seconds = 0;      // reading, encoding and writing
};

// The tokenizer's identity in the index: fnv1a64 of its file's bytes (the tokenizer.json or
// tokenizer.model of a folder), or of "byte".
std::uint64_t tokenizer_identity(const std::string& tokenizer_path);

CorpusStats tokenize_corpus(const tokenizer::Tokenizer& tokenizer, std::uint64_t tokenizer_id,
                            const std::string& input, const std::string& prefix);

}  // namespace origami::data
