// Training data: a byte-level tokenizer (a token is a byte, vocabulary 256), a token dataset
// read from text files, token files (docs/data.md: Origami's, flat nanoGPT / llm.c ones,
// Megatron's indexed datasets) or a built-in corpus, and deterministic batches.
//
// A dataset is one or more sources, each a stream of tokens with a weight (a blend). Batch
// sequence b of step t, row index r = t * B + b, is a window of S + 1 tokens of one source,
// in one of two orders (--data-order):
//   random (the default): windows drawn with replacement at any offset, as nanoGPT does:
//     source = the first i with v * sum(w) < w_0 + ... + w_i,  v = uniform(seed "data.blend", r)
//              (one source: 0, and no draw)
//     start  = floor(u * (N_i - S)),  u = uniform(seed "data.windows", r)
//   epoch: each source cut into M_i = floor((N_i - 1) / S) windows starting at multiples of S,
//     each seen once per epoch, in an order keyed by (seed, source, epoch):
//     rows are dealt to sources in blocks of kBlendBlock, n_i of each block to source i (the
//     weights by largest remainder), at slots permuted per block; the row is sample j of its
//     source, epoch e = j / M_i, start = S * permute(j mod M_i, M_i, key(seed, i, e)).
// Both are pure functions of (seed, step, b) (Philox, origami/core/rng.h; data/permutation.h),
// so any rank computes any batch or any part of one without communicating, and a run resumed
// at step t sees exactly the batches it would have seen: the checkpoint's batches_drawn is
// the whole cursor. A window may span documents: their end-of-text tokens separate them, as in
// nanoGPT and Megatron; with document masking (DataOptions::document_masking, docs/data.md)
// each row also carries its documents, from the sources' document index: the same windows,
// cut at the document boundaries that fall inside them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "origami/core/memory_tracker.h"
#include "origami/core/tensor.h"
#include "origami/data/token_view.h"
#include "origami/tokenizer/byte_tokenizer.h"

namespace origami::tokenizer {
class Tokenizer;
}

namespace origami::data {

// A token is a byte: ids 0..255, and decode(encode(s)) == s for any byte string (the code
// lives with the tokenizers, below the data).
using ByteTokenizer = tokenizer::ByteCodec;

// The built-in English corpus (a few KB) used when no data file is given.
std::string_view default_corpus_text();

struct Batch {
  Tensor input_ids;  // I32 [rows, S]
  Tensor labels;     // I32 [rows, S]: labels[b, s] = the token after input_ids[b, s]
  // Document masking only (else undefined): documents[b, s] is the document of token s within
  // its row, counted from 0 at the row's first token and up by one at each boundary;
  // positions[b, s] its position within that document, 0 at the document's first token or at
  // the row's first token (the part of a document before the window is not in the row: RoPE
  // is relative, so the restart changes no score). A label that would cross into the next
  // document is kIgnoreLabel.
  Tensor documents = {};  // I32 [rows, S]
  Tensor positions = {};  // I64 [rows, S]
};

// One stream of tokens of a dataset.
struct TokenSource {
  std::string label;   // the path (or "built-in corpus")
  std::string format;  // "text (byte tokens)", "Origami token file", "flat uint16", ...
  double weight = 1;   // its share of the sequences in a blend
  TokenView tokens;
  std::shared_ptr<const void> storage;  // keeps `tokens` alive (a vector or a mapping)
  // The vocabulary the file declares (Origami's index), else the largest id + 1.
  std::int64_t vocab_size = 0;
  bool vocab_declared = false;
  std::int64_t documents = 0;  // 0: the format does not say
  // Token offsets of the documents, 0 = o[0] < ... < o[D] = tokens; empty when the format has
  // no document index (read for document masking only).
  std::vector<std::int64_t> document_offsets;
  bool documents_from_eos = false;  // the offsets were found by --eos-id (a flat .bin)
  LargestId largest;
};

enum class DataOrder { Random, Epoch };

// How --data is read and walked.
struct DataOptions {
  int flat_width = 2;  // --data-dtype of a flat .bin: 2 (uint16, nanoGPT's) or 4 (uint32)
  DataOrder order = DataOrder::Random;
  // --document-masking: rows carry their documents (Batch). Every source must have a document
  // index (an Origami token file or a Megatron prefix); ConfigError otherwise, naming it.
  bool document_masking = false;
  // --eos-id (with document_masking only): the documents of a flat or llm.c .bin, which has no
  // document index, end after each token of this id (the eos belongs to the document it ends;
  // data/token_view.h documents_ending_at). A source with its own index (an Origami token file,
  // a Megatron prefix) keeps its index. -1: not given.
  std::int64_t eos_id = -1;
  // Text sources (and the built-in corpus) are encoded by it, with no special tokens added:
  // the text is one token stream. Null: byte tokens.
  std::shared_ptr<const tokenizer::Tokenizer> text_tokenizer = {};
};
// --data-dtype "uint16" or "uint32", --data-order "random" or "epoch", and --tokenizer (empty
// or "byte": bytes; else tokenizer::load of it, refused when its vocabulary exceeds the model's
// `vocab_size`, naming both numbers, before any data is read); ConfigError otherwise.
DataOptions data_options(const std::string& data_dtype, const std::string& data_order,
                         const std::string& tokenizer_path = "", std::int64_t vocab_size = 0);

// Rows per block of the epoch order's blend (a weight must earn at least one row of it).
inline constexpr std::int64_t kBlendBlock = 4096;

struct Window {
  int source = 0;
  std::int64_t start = 0;
};

// Document masking of one row: the window of S tokens from `start` of a source whose documents
// begin at `offsets` (TokenSource::document_offsets) gets its documents and positions (Batch),
// and the labels of the tokens that end a document become kIgnoreLabel.
void cut_at_documents(const std::vector<std::int64_t>& offsets, std::int64_t start,
                      std::int64_t S, std::int32_t* documents, std::int64_t* positions,
                      std::int32_t* labels);

class TokenDataset;
// The dataset of a run (TokenDataset::open of `spec`; the built-in corpus when it is empty),
// refused before anything is allocated unless every source fits the model's vocabulary and
// holds a window of seq + 1 tokens, and an eos_id is inside the vocabulary.
TokenDataset open_for_training(const std::string& spec, const DataOptions& options,
                               std::int64_t vocab_size, std::int64_t seq);

class TokenDataset {
 public:
  // Reads and tokenizes a text file; a missing, unreadable or empty file is a ConfigError
  // naming the path.
  static TokenDataset from_file(const std::string& path);
  static TokenDataset from_text(std::string_view text, std::string label);
  static TokenDataset default_corpus();
  // The data of a --data spec: PATH[:WEIGHT][,PATH[:WEIGHT]...] (weights > 0, default 1;
  // a spec that is an existing file is that one path as given). Each PATH is, in this order:
  // an Origami token file prefix (PATH.index exists; PATH.tokens / PATH.index name it too), a
  // Megatron prefix (PATH.idx and PATH.bin exist), a flat or llm.c file ending in .bin, or a
  // text file of byte tokens.
  // A blend in the epoch order is refused when a weight earns no row of kBlendBlock.
  static TokenDataset open(const std::string& spec, const DataOptions& options = {});

  // "PATH" for one source, "PATH (weight 0.7) + PATH (weight 0.3)" for a blend.
  std::string label() const;
  // For the training log: each source's label, format, tokens, documents and share, and the
  // order, e.g. "corpus (Origami token file (uint16), 6892 tokens, 200 documents), random order"
  // (then ", packed documents masked" with document masking).
  std::string describe() const;
  DataOrder order() const { return order_; }
  bool document_masking() const { return document_masking_; }
  // Tokens of all sources together.
  std::int64_t size() const;
  const std::vector<TokenSource>& sources() const { return sources_; }
  // Token i of source 0 (tests and the single-file readers).
  std::int32_t token(std::int64_t i) const { return sources_[0].tokens.at(i); }

  // ConfigError unless every source's vocabulary fits `vocab_size` (names the source, its
  // vocabulary or largest id and where it occurs, and the model's vocab_size).
  void check_vocab(std::int64_t vocab_size) const;

  // Where sequence b of step `step` in a batch of B sequences of S tokens comes from (see
  // top). ConfigError if a source is shorter than S + 1 tokens.
  Window window(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t b,
                std::int64_t S) const;
  std::int64_t window_start(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t b,
                            std::int64_t S) const {
    return window(seed, step, B, b, S).start;
  }
  // Sequences [first, first + rows) of the batch of a step, allocated under `category` on
  // `tracker`: what one data-parallel rank holds, read without the others.
  Batch rows(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t first,
             std::int64_t rows, std::int64_t S, MemoryTracker& tracker,
             MemCategory category = MemCategory::Workspace) const;
  // The whole batch of a step.
  Batch batch(std::uint64_t seed, std::int64_t step, std::int64_t B, std::int64_t S,
              MemoryTracker& tracker, MemCategory category = MemCategory::Workspace) const {
    return rows(seed, step, B, 0, B, S, tracker, category);
  }

 private:
  TokenDataset(std::vector<TokenSource> sources, DataOrder order, bool document_masking = false);
  Window epoch_window(std::uint64_t seed, std::uint64_t row, std::int64_t S) const;
  std::vector<TokenSource> sources_;
  DataOrder order_;
  bool document_masking_ = false;
  std::vector<double> cumulative_;        // weights' running sums
  std::vector<std::int64_t> block_rows_;  // epoch order: running sums of n_i over the sources
};

// Walks the steps of a run: next_batch returns the batch of step() and advances. Construct
// it at the step a run resumes from to continue with the same batches. The dataset must
// outlive the sampler.
class BatchSampler {
 public:
  BatchSampler(const TokenDataset& dataset, std::uint64_t seed, std::int64_t start_step = 0)
      : dataset_(&dataset), seed_(seed), step_(start_step) {}
  Batch next_batch(std::int64_t B, std::int64_t S, MemoryTracker& tracker,
                   MemCategory category = MemCategory::Workspace) {
    return next_rows(B, 0, B, S, tracker, category);
  }
  // Sequences [first, first + rows) of the next batch of B.
  Batch next_rows(std::int64_t B, std::int64_t first, std::int64_t rows, std::int64_t S,
                  MemoryTracker& tracker, MemCategory category = MemCategory::Workspace);
  std::int64_t step() const { return step_; }

 private:
  const TokenDataset* dataset_;
  std::uint64_t seed_;
  std::int64_t step_;
};

}  // namespace origami::data
