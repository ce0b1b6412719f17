// `origami tokenize`: a tokenizer as people debug one. --print reads text from standard input
// and prints its token ids, space-separated (no special tokens unless --add-special-tokens);
// --decode reads ids (separated by whitespace) and writes their text; --input FILE --out PREFIX
// writes a corpus (.txt or .jsonl) as an Origami token file (docs/data.md) for `train --data`.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace origami::cli {

struct TokenizeOptions {
  std::string tokenizer = "byte";  // origami::tokenizer::load's PATH
  bool print = false, decode = false, add_special_tokens = false;
  std::string input, out;  // --input FILE --out PREFIX
};

// Runs on `in` and `out`; ConfigError (exit 2) for bad input, naming it.
void tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out);

class TokenizeCommand {
 public:
  explicit TokenizeCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  TokenizeOptions options_;
};

}  // namespace origami::cli
