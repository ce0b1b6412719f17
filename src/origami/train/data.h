// Training data: a byte-level tokenizer (a token is a byte, vocabulary 256), a token dataset
// read from a text file or from a built-in corpus, and deterministic batches.
//
// Batch sequence b of step t is the window of S + 1 tokens starting at
//   start = floor(u * (N - S)),  u = rng::uniform(make_key(seed, "data.windows"), t * B + b)
// (Philox, origami/core/rng.h): a pure function of (seed, step, b), so any rank can compute
// any batch or any part of one without communicating, and a run resumed at step t sees
// exactly the batches it would have seen.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "origami/core/memory_tracker.h"
#include "origami/core/tensor.h"

namespace origami::data {

// A token is a byte: ids 0..255, and decode(encode(s)) == s for any byte string.
struct ByteTokenizer {
  static constexpr std::int64_t kVocabSize = 256;
  static std::vector<std::int32_t> encode(std::string_view text);
  // Refuses (Error) ids outside 0..255.
  static std::string decode(std::span<const std::int32_t> ids);
};

// The built-in English corpus (a few KB) used when no data file is given.
std::string_view default_corpus_text();

struct Batch {
  Tensor input_ids;  // I32 [B, S]
  Tensor labels;     // I32 [B, S]: labels[b, s] = the token after input_ids[b, s]
};

class TokenDataset {
 public:
  // Reads and tokenizes a text file; a missing, unreadable or empty file is a ConfigError
  // naming the path.
  static TokenDataset from_file(const std::string& path);
  static TokenDataset from_text(std::string_view text, std::string label);
  static TokenDataset default_corpus();
  // The training data of `origami train`: `data_path` (empty: the built-in corpus) encoded by
  // the tokenizer at `tokenizer_path` (tokenizer/tokenizer.h; empty or "byte": bytes), with no
  // special tokens added: the text is one token stream. A tokenizer whose vocabulary exceeds
  // `vocab_size` is a ConfigError naming both numbers, before anything is read.
  static TokenDataset load(const std::string& data_path, const std::string& tokenizer_path,
                           std::int64_t vocab_size);

  const std::string& label() const { return label_; }
  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }
  const std::vector<std::int32_t>& tokens() const { return tokens_; }

  // ConfigError unless every token id is below vocab_size (names the largest id, where it
  // occurs, and the vocabulary).
  void check_vocab(std::int64_t vocab_size) const;

  // Start of sequence b of step `step` in a batch of B sequences of S tokens (see top).
  // ConfigError if the dataset is shorter than S + 1 tokens.
  std::int64_t window_start(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t b,
                            std::int64_t S) const;
  // The whole batch of a step, allocated under `category` on `tracker`.
  Batch batch(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t S,
              MemoryTracker& tracker, MemCategory category = MemCategory::Workspace) const;

 private:
  TokenDataset(std::vector<std::int32_t> tokens, std::string label);
  std::vector<std::int32_t> tokens_;
  std::string label_;
};

// Walks the steps of a run: next_batch returns the batch of step() and advances. Construct
// it at the step a run resumes from to continue with the same batches. The dataset must
// outlive the sampler.
class BatchSampler {
 public:
  BatchSampler(const TokenDataset& dataset, std::uint64_t seed, std::int64_t start_step = 0)
      : dataset_(&dataset), seed_(seed), step_(start_step) {}
  Batch next_batch(std::int64_t B, std::int64_t S, MemoryTracker& tracker,
                   MemCategory category = MemCategory::Workspace);
  std::int64_t step() const { return step_; }

 private:
  const TokenDataset* dataset_;
  std::uint64_t seed_;
  std::int64_t step_;
};

}  // namespace origami::data
