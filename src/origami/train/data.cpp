#include "origami/train/data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include "origami/core/error.h"
#include "origami/core/rng.h"
#include "origami/io/text_file.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::data {

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text) {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i)
    ids[i] = static_cast<std::int32_t>(static_cast<unsigned char>(text[i]));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> ids) {
  std::string text(ids.size(), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ORIGAMI_CHECK(ids[i] >= 0 && ids[i] < kVocabSize,
                  "byte tokenizer: id {} at position {} is not a byte (0..255)", ids[i], i);
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

TokenDataset::TokenDataset(std::vector<std::int32_t> tokens, std::string label)
    : tokens_(std::move(tokens)), label_(std::move(label)) {}

TokenDataset TokenDataset::from_file(const std::string& path) {
  const std::string s = io::read_text_file(path, io::kDataFileLimit, "--data");
  if (s.empty())
    throw ConfigError(
        fmt::format("data: the data file '{}' is empty; give a text file with "
                    "at least one sequence of tokens",
                    path));
  return TokenDataset(ByteTokenizer::encode(s), path);
}

TokenDataset TokenDataset::from_text(std::string_view text, std::string label) {
  if (text.empty()) throw ConfigError(fmt::format("data: the text '{}' is empty", label));
  return TokenDataset(ByteTokenizer::encode(text), std::move(label));
}

TokenDataset TokenDataset::default_corpus() {
  return from_text(default_corpus_text(), "built-in corpus");
}

TokenDataset TokenDataset::load(const std::string& data_path, const std::string& tokenizer_path,
                                std::int64_t vocab_size) {
  if (tokenizer_path.empty() || tokenizer_path == "byte")
    return data_path.empty() ? default_corpus() : from_file(data_path);
  const std::unique_ptr<tokenizer::Tokenizer> t = tokenizer::load(tokenizer_path);
  if (t->vocab_size() > vocab_size)
    throw ConfigError(fmt::format(
        "--tokenizer {} has {} tokens but the model's vocab_size is {}: its ids would fall "
        "outside the embedding; give a model with vocab_size >= {} or another tokenizer",
        tokenizer_path, t->vocab_size(), vocab_size, t->vocab_size()));
  const std::string text = data_path.empty()
                               ? std::string(default_corpus_text())
                               : io::read_text_file(data_path, io::kDataFileLimit, "--data");
  const std::string label = data_path.empty() ? "built-in corpus" : data_path;
  if (text.empty())
    throw ConfigError(
        fmt::format("data: the data file '{}' is empty; give a text file with at "
                    "least one sequence of tokens",
                    label));
  return TokenDataset(t->encode(text), label + " (" + t->kind() + ")");
}

void TokenDataset::check_vocab(std::int64_t vocab_size) const {
  const auto it = std::max_element(tokens_.begin(), tokens_.end());
  if (it != tokens_.end() && *it >= vocab_size)
    throw ConfigError(fmt::format(
        "data: '{}' contains token id {} (at token {}) but the model's vocab_size is {}; the "
        "byte-level tokenizer needs vocab_size >= {} for this data (256 covers every byte)",
        label_, *it, it - tokens_.begin(), vocab_size, *it + 1));
  const auto neg = std::min_element(tokens_.begin(), tokens_.end());
  if (neg != tokens_.end() && *neg < 0)
    throw ConfigError(fmt::format("data: '{}' contains the negative token id {} at token {}",
                                  label_, *neg, neg - tokens_.begin()));
}

std::int64_t TokenDataset::window_start(std::uint64_t seed, std::int64_t step, std::int64_t B,
                                        std::int64_t b, std::int64_t S) const {
  if (S <= 0 || B <= 0)
    throw ConfigError(fmt::format("data: batch {} x sequence {} must both be positive", B, S));
  if (size() < S + 1)
    throw ConfigError(fmt::format(
        "data: '{}' has {} tokens but a sequence of {} needs at least {} (inputs plus the next "
        "token); use a shorter sequence or a larger data file",
        label_, size(), S, S + 1));
  ORIGAMI_CHECK(step >= 0 && b >= 0 && b < B, "data: sequence {} of step {} in a batch of {}", b,
                step, B);
  static constexpr std::string_view kStream = "data.windows";
  const rng::Key key = rng::make_key(seed, kStream);
  const std::uint64_t index = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(B) +
                              static_cast<std::uint64_t>(b);
  // N - S possible starts (0 .. N-S-1), each window holding S + 1 tokens. u < 1 strictly,
  // so the floor stays below N - S; the min guards the last double rounding.
  const std::int64_t starts = size() - S;
  const auto start =
      static_cast<std::int64_t>(std::floor(rng::uniform(key, index) * static_cast<double>(starts)));
  return std::min(start, starts - 1);
}

Batch TokenDataset::batch(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t S,
                          MemoryTracker& tracker, MemCategory category) const {
  (void)window_start(seed, step, B, 0, S);  // refuses bad sizes before allocating
  Batch out{Tensor(tracker, category, DType::I32, {B, S}),
            Tensor(tracker, category, DType::I32, {B, S})};
  if (!out.input_ids.backed()) return out;  // dry run: accounted only
  std::int32_t* in = out.input_ids.data<std::int32_t>();
  std::int32_t* lab = out.labels.data<std::int32_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int32_t* w = tokens_.data() + window_start(seed, step, B, b, S);
    std::copy(w, w + S, in + b * S);
    std::copy(w + 1, w + S + 1, lab + b * S);
  }
  return out;
}

Batch BatchSampler::next_batch(std::int64_t B, std::int64_t S, MemoryTracker& tracker,
                               MemCategory category) {
  Batch out = dataset_->batch(seed_, step_, B, S, tracker, category);
  ++step_;
  return out;
}

}  // namespace origami::data
