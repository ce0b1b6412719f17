#include "origami/cli/tokenize_command.h"

#include <charconv>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/data/tokenize_corpus.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::cli {

namespace {

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Whitespace-separated token ids; a word that is no id is a ConfigError naming it.
std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    std::int32_t id = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec != std::errc() || end != word.data() + word.size())
      throw ConfigError(fmt::format(
          "tokenize --decode: '{}' (word {} of the input) is not a token id (expected integers "
          "separated by whitespace)",
          word, ids.size() + 1));
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

void tokenize(const TokenizeOptions& o, std::istream& in, std::ostream& out) {
  const bool corpus = !o.input.empty() || !o.out.empty();
  if (corpus + o.print + o.decode != 1)
    throw ConfigError(
        "tokenize: give one of --print (text in, token ids out), --decode (token ids in, text "
        "out) or --input FILE --out PREFIX (a corpus into a token file)");
  if (corpus && (o.input.empty() || o.out.empty()))
    throw ConfigError("tokenize: --input FILE and --out PREFIX go together");
  if (corpus && o.add_special_tokens)
    throw ConfigError("tokenize: --add-special-tokens goes with --print; --input adds the "
                      "tokenizer's eos after each document");
  const auto tokenizer = tokenizer::load(o.tokenizer);
  if (corpus) {
    const data::CorpusStats s = data::tokenize_corpus(
        *tokenizer, data::tokenizer_identity(o.tokenizer), o.input, o.out);
    out << fmt::format(
        "tokenize: {} documents ({} empty, skipped), {} tokens of uint{} from {} bytes of text in "
        "{:.2f} s: {:.2f} MB/s, {:.0f} tokens/s; wrote {}.tokens and {}.index\n",
        s.documents, s.skipped, s.tokens, 8 * s.width, s.bytes, s.seconds,
        static_cast<double>(s.bytes) / 1e6 / s.seconds,
        static_cast<double>(s.tokens) / s.seconds, o.out, o.out);
    out.flush();
    return;
  }
  if (o.print) {
    const std::vector<std::int32_t> ids = tokenizer->encode(read_all(in), o.add_special_tokens);
    std::string line;
    for (std::size_t i = 0; i < ids.size(); ++i) line += fmt::format("{}{}", i ? " " : "", ids[i]);
    out << line << "\n";
  } else {
    if (o.add_special_tokens)
      throw ConfigError("tokenize: --add-special-tokens goes with --print, not --decode");
    out << tokenizer->decode(parse_ids(read_all(in)));
  }
  out.flush();
}

TokenizeCommand::TokenizeCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "tokenize", "Text to token ids (--print) or token ids to text (--decode), on standard "
                  "input and output; or a corpus into a token file (--input, --out)");
  command_
      ->add_option("--tokenizer", options_.tokenizer,
                   "\"byte\", a tokenizer.json, a SentencePiece .model, or a folder holding one "
                   "(tokenizer_config.json beside it names the special tokens)")
      ->capture_default_str();
  auto* print = command_->add_flag("--print", options_.print,
                                   "read text, print its token ids separated by spaces");
  auto* decode = command_->add_flag("--decode", options_.decode,
                                    "read token ids separated by whitespace, write their text");
  print->excludes(decode);
  command_->add_option("--input", options_.input,
                       "a corpus to write as a token file: .jsonl (a \"text\" per line) or text "
                       "(documents separated by blank lines)");
  command_->add_option("--out", options_.out,
                       "with --input: write PREFIX.tokens and PREFIX.index (docs/data.md)");
  command_->add_flag("--add-special-tokens", options_.add_special_tokens,
                     "with --print: add the tokenizer's special tokens (bos, ...) around the text");
}

int TokenizeCommand::run() {
  tokenize(options_, std::cin, std::cout);
  return 0;
}

}  // namespace origami::cli
