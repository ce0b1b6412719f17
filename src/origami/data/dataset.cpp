#include "origami/data/dataset.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "origami/core/error.h"
#include "origami/core/rng.h"
#include "origami/data/foreign_token_files.h"
#include "origami/data/permutation.h"
#include "origami/data/token_file.h"
#include "origami/io/text_file.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::data {

DataOptions data_options(const std::string& data_dtype, const std::string& data_order,
                         const std::string& tokenizer_path, std::int64_t vocab_size) {
  DataOptions o;
  if (!tokenizer_path.empty() && tokenizer_path != "byte") {
    o.text_tokenizer = tokenizer::load(tokenizer_path);
    if (o.text_tokenizer->vocab_size() > vocab_size)
      throw ConfigError(fmt::format(
          "--tokenizer {} has {} tokens but the model's vocab_size is {}: its ids would fall "
          "outside the embedding; give a model with vocab_size >= {} or another tokenizer",
          tokenizer_path, o.text_tokenizer->vocab_size(), vocab_size,
          o.text_tokenizer->vocab_size()));
  }
  if (data_dtype == "uint32") o.flat_width = 4;
  else if (data_dtype != "uint16")
    throw ConfigError(fmt::format("--data-dtype '{}': use uint16 (nanoGPT's) or uint32",
                                  data_dtype));
  if (data_order == "epoch") o.order = DataOrder::Epoch;
  else if (data_order != "random")
    throw ConfigError(fmt::format("--data-order '{}': use random (windows drawn anywhere) or "
                                  "epoch (each window once per epoch)",
                                  data_order));
  return o;
}

namespace {

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
std::string strip(const std::string& s, std::string_view tail) {
  return s.substr(0, s.size() - tail.size());
}
bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// Tokens of text (the options' tokenizer's, else bytes), held in memory.
TokenSource text_source(std::string_view text, std::string label, const DataOptions& options) {
  const tokenizer::Tokenizer* t = options.text_tokenizer.get();
  auto held = std::make_shared<const std::vector<std::int32_t>>(
      t != nullptr ? t->encode(text) : ByteTokenizer::encode(text));
  TokenSource s;
  s.label = std::move(label);
  s.format = t != nullptr ? fmt::format("text ({} tokens)", t->kind()) : "text (byte tokens)";
  s.tokens = TokenView{reinterpret_cast<const std::uint8_t*>(held->data()), 4,
                       static_cast<std::int64_t>(held->size())};
  s.storage = held;
  s.largest = largest_id(s.tokens);
  s.vocab_size = static_cast<std::int64_t>(s.largest.id) + 1;
  return s;
}

TokenSource from_foreign(ForeignTokenFile f, const std::string& label) {
  TokenSource s;
  s.label = label;
  s.format = f.format;
  s.tokens = f.tokens;
  s.storage = f.storage;
  s.documents = f.documents;
  s.document_offsets = std::move(f.document_offsets);
  s.largest = f.largest;
  s.vocab_size = static_cast<std::int64_t>(f.largest.id) + 1;
  return s;
}

// One PATH of a --data spec, its format found as TokenDataset::open says.
TokenSource open_source(const std::string& path, const DataOptions& format) {
  for (const std::string_view tail : {".index", ".tokens"})
    if (ends_with(path, tail) && is_token_file_prefix(strip(path, tail)))
      return open_source(strip(path, tail), format);
  if (is_token_file_prefix(path)) {
    TokenFile f = open_token_file(path);
    TokenSource s;
    s.label = path;
    s.format = fmt::format("Origami token file (uint{})", 8 * f.tokens.width);
    s.tokens = f.tokens;
    s.storage = f.tokens_file;
    s.vocab_size = f.vocab_size;
    s.vocab_declared = true;
    s.documents = f.documents();
    s.largest = largest_id(f.tokens);
    if (format.document_masking) {
      s.document_offsets.resize(static_cast<std::size_t>(s.documents + 1));
      for (std::int64_t d = 0; d <= s.documents; ++d)
        s.document_offsets[static_cast<std::size_t>(d)] = f.document_offset(d);
    }
    return s;
  }
  for (const std::string_view tail : {".idx", ".bin"})
    if (ends_with(path, tail) && is_megatron_prefix(strip(path, tail)))
      return from_foreign(open_megatron_dataset(strip(path, tail)), path);
  if (is_megatron_prefix(path)) return from_foreign(open_megatron_dataset(path), path);
  if (ends_with(path, ".bin")) {
    TokenSource s = from_foreign(open_flat_token_file(path, format.flat_width), path);
    if (format.document_masking && format.eos_id >= 0) {
      s.document_offsets =
          documents_ending_at(s.tokens, static_cast<std::uint32_t>(format.eos_id));
      s.documents = static_cast<std::int64_t>(s.document_offsets.size()) - 1;
      if (s.documents <= 1 && s.tokens.at(s.tokens.count - 1) != format.eos_id)
        throw ConfigError(fmt::format(
            "--eos-id {}: '{}' ({}, {} tokens) holds no token {} before its end, so it would be "
            "one document; give the id its documents end with (e.g. GPT-2's <|endoftext|> is "
            "50256)",
            format.eos_id, path, s.format, s.tokens.count, format.eos_id));
      s.format += fmt::format(", documents end at eos {}", format.eos_id);
      s.documents_from_eos = true;
    }
    return s;
  }
  const std::string text = io::read_text_file(path, io::kDataFileLimit, "--data");
  if (text.empty())
    throw ConfigError(
        fmt::format("data: the data file '{}' is empty; give a text file with "
                    "at least one sequence of tokens",
                    path));
  return text_source(text, path, format);
}

// "PATH" or "PATH:WEIGHT" (the weight is what follows the last ':' when it reads as a number).
std::pair<std::string, double> path_and_weight(const std::string& item) {
  const std::size_t colon = item.rfind(':');
  if (colon == std::string::npos) return {item, 1.0};
  const std::string tail = item.substr(colon + 1);
  double w = 0;
  const auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), w);
  if (ec != std::errc() || end != tail.data() + tail.size() || tail.empty()) return {item, 1.0};
  if (!(std::isfinite(w) && w > 0))
    throw ConfigError(fmt::format("--data: the weight of '{}' is {}; a weight must be a number "
                                  "above 0",
                                  item.substr(0, colon), tail));
  return {item.substr(0, colon), w};
}

}  // namespace

void cut_at_documents(const std::vector<std::int64_t>& offsets, std::int64_t start,
                      std::int64_t S, std::int32_t* documents, std::int64_t* positions,
                      std::int32_t* labels) {
  // The document holding the window's first token, then the next boundary after it.
  auto next = std::upper_bound(offsets.begin(), offsets.end(), start);
  std::int32_t doc = 0;
  std::int64_t doc_start = start;
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t t = start + s;
    if (next != offsets.end() && t == *next) {  // token t begins a document
      ++doc;
      doc_start = t;
      ++next;
    }
    documents[s] = doc;
    positions[s] = t - doc_start;
    // The label of s is token t + 1: another document's first token is not a target.
    if (next != offsets.end() && t + 1 == *next) labels[s] = kernels::kIgnoreLabel;
  }
}

// Key of a (stream, a, b) triple under the seed: one Philox draw.
static rng::Key derived_key(std::uint64_t seed, std::string_view stream, std::uint64_t a,
                     std::uint32_t b) {
  const rng::Counter c = rng::philox4x32_10(
      {static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(a >> 32), b, 0},
      rng::make_key(seed, stream));
  return {c[0], c[1]};
}

TokenDataset::TokenDataset(std::vector<TokenSource> sources, DataOrder order,
                           bool document_masking)
    : sources_(std::move(sources)), order_(order), document_masking_(document_masking) {
  if (document_masking_)
    for (const TokenSource& s : sources_)
      if (s.document_offsets.empty())
        throw ConfigError(fmt::format(
            "--document-masking needs the document boundaries of every --data source, but '{}' "
            "({}) has no document index (Origami token files and Megatron prefixes have one); "
            "write it as a token file (origami tokenize --input FILE --out PREFIX), name a flat "
            ".bin's end-of-document token with --eos-id, or train without --document-masking",
            s.label, s.format));
  double sum = 0;
  for (const TokenSource& s : sources_) cumulative_.push_back(sum += s.weight);
  if (order_ != DataOrder::Epoch) return;
  // The rows of a block by largest remainder: floor of each share, then one more to the
  // largest remainders (the earlier source on a tie) until the block is full.
  std::vector<std::int64_t> rows(sources_.size());
  std::vector<double> rest(sources_.size());
  std::int64_t dealt = 0;
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    const double share = sources_[i].weight / sum * static_cast<double>(kBlendBlock);
    rows[i] = static_cast<std::int64_t>(std::floor(share));
    rest[i] = share - static_cast<double>(rows[i]);
    dealt += rows[i];
  }
  for (; dealt < kBlendBlock; ++dealt) {
    const auto most = std::max_element(rest.begin(), rest.end()) - rest.begin();
    ++rows[static_cast<std::size_t>(most)];
    rest[static_cast<std::size_t>(most)] = -1;
  }
  std::int64_t running = 0;
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    if (rows[i] == 0)
      throw ConfigError(fmt::format(
          "--data: the weight {} of '{}' earns no row of the epoch order's blocks of {} rows; "
          "raise it to at least {:.3g} of the total or use --data-order random",
          sources_[i].weight, sources_[i].label, kBlendBlock, 1.0 / kBlendBlock));
    block_rows_.push_back(running += rows[i]);
  }
}

TokenDataset TokenDataset::from_file(const std::string& path) {
  const std::string s = io::read_text_file(path, io::kDataFileLimit, "--data");
  if (s.empty())
    throw ConfigError(
        fmt::format("data: the data file '{}' is empty; give a text file with "
                    "at least one sequence of tokens",
                    path));
  return from_text(s, path);
}

TokenDataset TokenDataset::from_text(std::string_view text, std::string label) {
  if (text.empty()) throw ConfigError(fmt::format("data: the text '{}' is empty", label));
  std::vector<TokenSource> one;
  one.push_back(text_source(text, std::move(label), {}));
  return TokenDataset(std::move(one), DataOrder::Random);
}

TokenDataset TokenDataset::default_corpus() {
  return from_text(default_corpus_text(), "built-in corpus");
}

TokenDataset TokenDataset::open(const std::string& spec, const DataOptions& format) {
  if (spec.empty()) {
    if (format.eos_id >= 0)
      throw ConfigError(fmt::format("--eos-id {} marks the documents of flat .bin files, but no "
                                    "--data is given (the built-in corpus is text); add --data "
                                    "FILE.bin or drop --eos-id",
                                    format.eos_id));
    std::vector<TokenSource> corpus;
    corpus.push_back(text_source(default_corpus_text(), "built-in corpus", format));
    return TokenDataset(std::move(corpus), format.order, format.document_masking);
  }
  std::vector<TokenSource> sources;
  if (is_file(spec)) {
    sources.push_back(open_source(spec, format));  // a path with ':' in it, as given
  } else {
    std::size_t begin = 0;
    for (;;) {
      const std::size_t comma = spec.find(',', begin);
      const std::string item = spec.substr(begin, comma == std::string::npos ? comma : comma - begin);
      if (item.empty())
        throw ConfigError(fmt::format("--data '{}': an empty item at character {}; write "
                                      "PATH[:WEIGHT] items separated by commas",
                                      spec, begin));
      auto [path, weight] = path_and_weight(item);
      sources.push_back(open_source(path, format));
      sources.back().weight = weight;
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
  }
  if (format.eos_id >= 0) {
    if (!format.document_masking)
      throw ConfigError(fmt::format("--eos-id {} marks the documents of flat .bin files for "
                                    "--document-masking; add --document-masking or drop --eos-id",
                                    format.eos_id));
    const bool used = std::any_of(sources.begin(), sources.end(),
                                  [](const TokenSource& s) { return s.documents_from_eos; });
    if (!used)
      throw ConfigError(fmt::format(
          "--eos-id {}: no --data source is a flat or llm.c .bin; the other formats' documents "
          "come from their own index (a token file's or a Megatron prefix's), which wins; drop "
          "--eos-id",
          format.eos_id));
  }
  return TokenDataset(std::move(sources), format.order, format.document_masking);
}

std::string TokenDataset::label() const {
  if (sources_.size() == 1) return sources_[0].label;
  std::string out;
  for (const TokenSource& s : sources_)
    out += fmt::format("{}{} (weight {:.3g})", out.empty() ? "" : " + ", s.label,
                       s.weight / cumulative_.back());
  return out;
}

std::string TokenDataset::describe() const {
  std::string out;
  for (const TokenSource& s : sources_) {
    out += fmt::format("{}{} ({}, {} tokens", out.empty() ? "" : " + ", s.label, s.format,
                       s.tokens.count);
    if (s.documents > 0) out += fmt::format(", {} documents", s.documents);
    if (sources_.size() > 1) out += fmt::format(", weight {:.3g}", s.weight / cumulative_.back());
    out += ")";
  }
  return out + (order_ == DataOrder::Epoch ? ", epoch order" : ", random order") +
         (document_masking_ ? ", packed documents masked" : "");
}

std::int64_t TokenDataset::size() const {
  std::int64_t n = 0;
  for (const TokenSource& s : sources_) n += s.tokens.count;
  return n;
}

void TokenDataset::check_vocab(std::int64_t vocab_size) const {
  for (const TokenSource& s : sources_) {
    if (s.vocab_declared && s.vocab_size > vocab_size)
      throw ConfigError(fmt::format(
          "data: '{}' was tokenized with a vocabulary of {} (its index says so) but the model's "
          "vocab_size is {}; train a model with vocab_size >= {} or tokenize with the model's "
          "tokenizer",
          s.label, s.vocab_size, vocab_size, s.vocab_size));
    if (s.largest.at >= 0 && static_cast<std::int64_t>(s.largest.id) >= vocab_size)
      throw ConfigError(fmt::format(
          "data: '{}' contains token id {} (at token {}, byte offset {}) but the model's "
          "vocab_size is {}; the data needs vocab_size >= {} ({} covers every byte of text)",
          s.label, s.largest.id, s.largest.at, s.largest.at * s.tokens.width, vocab_size,
          static_cast<std::int64_t>(s.largest.id) + 1, ByteTokenizer::kVocabSize));
  }
}

TokenDataset open_for_training(const std::string& spec, const DataOptions& format,
                               std::int64_t vocab_size, std::int64_t seq) {
  if (format.eos_id >= vocab_size || format.eos_id < -1)
    throw ConfigError(fmt::format("--eos-id {} is outside the model's vocabulary of {} ids "
                                  "(0 .. {}); give the id the data's documents end with",
                                  format.eos_id, vocab_size, vocab_size - 1));
  TokenDataset d = TokenDataset::open(spec, format);
  d.check_vocab(vocab_size);
  for (const TokenSource& s : d.sources())
    if (s.tokens.count < seq + 1)
      throw ConfigError(fmt::format("the data ({}) has {} tokens, fewer than --seq + 1 = {}; "
                                    "use a shorter --seq or more data",
                                    s.label, s.tokens.count, seq + 1));
  return d;
}

Window TokenDataset::window(std::uint64_t seed, std::int64_t step, std::int64_t B,
                            std::int64_t b, std::int64_t S) const {
  if (S <= 0 || B <= 0)
    throw ConfigError(fmt::format("data: batch {} x sequence {} must both be positive", B, S));
  for (const TokenSource& s : sources_)
    if (s.tokens.count < S + 1)
      throw ConfigError(fmt::format(
          "data: '{}' has {} tokens but a sequence of {} needs at least {} (inputs plus the next "
          "token); use a shorter sequence or a larger data file",
          s.label, s.tokens.count, S, S + 1));
  ORIGAMI_CHECK(step >= 0 && b >= 0 && b < B, "data: sequence {} of step {} in a batch of {}", b,
                step, B);
  const std::uint64_t index = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(B) +
                              static_cast<std::uint64_t>(b);
  if (order_ == DataOrder::Epoch) return epoch_window(seed, index, S);
  Window w;
  if (sources_.size() > 1) {
    static constexpr std::string_view kBlend = "data.blend";
    const double v = rng::uniform(rng::make_key(seed, kBlend), index) * cumulative_.back();
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), v);
    w.source = static_cast<int>(std::min<std::ptrdiff_t>(it - cumulative_.begin(),
                                                         std::ssize(cumulative_) - 1));
  }
  static constexpr std::string_view kStream = "data.windows";
  const rng::Key key = rng::make_key(seed, kStream);
  // N - S possible starts (0 .. N-S-1), each window holding S + 1 tokens. u < 1 strictly,
  // so the floor stays below N - S; the min guards the last double rounding.
  const std::int64_t starts = sources_[static_cast<std::size_t>(w.source)].tokens.count - S;
  const auto start =
      static_cast<std::int64_t>(std::floor(rng::uniform(key, index) * static_cast<double>(starts)));
  w.start = std::min(start, starts - 1);
  return w;
}

Window TokenDataset::epoch_window(std::uint64_t seed, std::uint64_t row, std::int64_t S) const {
  Window w;
  std::uint64_t sample = row;  // the row's sample number within its source
  if (sources_.size() > 1) {
    const std::uint64_t block = row / kBlendBlock;
    const std::uint64_t slot = permute(row % kBlendBlock, kBlendBlock,
                                       derived_key(seed, "data.blend.block", block, 0));
    const auto it = std::upper_bound(block_rows_.begin(), block_rows_.end(),
                                     static_cast<std::int64_t>(slot));
    w.source = static_cast<int>(it - block_rows_.begin());
    const std::int64_t before = w.source == 0 ? 0 : block_rows_[static_cast<std::size_t>(w.source - 1)];
    const std::int64_t rows = block_rows_[static_cast<std::size_t>(w.source)] - before;
    sample = block * static_cast<std::uint64_t>(rows) + (slot - static_cast<std::uint64_t>(before));
  }
  const std::int64_t n = sources_[static_cast<std::size_t>(w.source)].tokens.count;
  const auto windows = static_cast<std::uint64_t>((n - 1) / S);  // >= 1: n >= S + 1
  const std::uint64_t epoch = sample / windows;
  const rng::Key key =
      derived_key(seed, "data.epoch", epoch, static_cast<std::uint32_t>(w.source));
  w.start = S * static_cast<std::int64_t>(permute(sample % windows, windows, key));
  return w;
}

Batch TokenDataset::rows(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t first,
                         std::int64_t rows, std::int64_t S, MemoryTracker& tracker,
                         MemCategory category) const {
  (void)window(seed, step, B, 0, S);  // refuses bad sizes before allocating
  ORIGAMI_CHECK(first >= 0 && rows >= 1 && first + rows <= B,
                "data: rows [{}, {}) of a batch of {}", first, first + rows, B);
  Batch out{Tensor(tracker, category, DType::I32, {rows, S}),
            Tensor(tracker, category, DType::I32, {rows, S})};
  if (!out.input_ids.backed()) return out;  // dry run: accounted only
  std::int32_t* in = out.input_ids.data<std::int32_t>();
  std::int32_t* lab = out.labels.data<std::int32_t>();
  if (document_masking_) {
    out.documents = Tensor(tracker, category, DType::I32, {rows, S});
    out.positions = Tensor(tracker, category, DType::I64, {rows, S});
  }
  std::vector<std::int32_t> w(static_cast<std::size_t>(S + 1));
  for (std::int64_t r = 0; r < rows; ++r) {
    const Window at = window(seed, step, B, first + r, S);
    const TokenSource& source = sources_[static_cast<std::size_t>(at.source)];
    source.tokens.copy(at.start, S + 1, w.data());
    std::copy(w.begin(), w.end() - 1, in + r * S);
    std::copy(w.begin() + 1, w.end(), lab + r * S);
    if (document_masking_)
      cut_at_documents(source.document_offsets, at.start, S,
                       out.documents.data<std::int32_t>() + r * S,
                       out.positions.data<std::int64_t>() + r * S, lab + r * S);
  }
  return out;
}

Batch BatchSampler::next_rows(std::int64_t B, std::int64_t first, std::int64_t rows,
                              std::int64_t S, MemoryTracker& tracker, MemCategory category) {
  Batch out = dataset_->rows(seed_, step_, B, first, rows, S, tracker, category);
  ++step_;
  return out;
}

}  // namespace origami::data
