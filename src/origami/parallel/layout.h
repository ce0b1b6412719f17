// Layouts: which tokens and which slice of each weight a rank holds.
//
// Tokens. A sequence of S positions is split over an axis of `degree` ranks:
//   * zigzag: 2D equal chunks; rank r holds chunks r and 2D-1-r, concatenated (equal causal
//     attention work on every rank). Needs S % 2D == 0.
//   * contiguous: rank r holds the r-th block of S/D positions. Needs S % D == 0.
//   * balanced: 2D*k equal chunks given to the ranks by their document-masked causal work,
//     per micro-batch (balanced_layout.h). Needs S % 2D == 0 and packed documents.
//   * full: every rank holds the whole sequence (degree is ignored).
// Every rank knows the global positions of its rows: RoPE and the causal mask use them.
//
// Weights. Heads, kv heads and FFN columns are split into equal contiguous ranges (H % T,
// Hkv % T and f % T checked); vocabulary rows are split into V_pad / T rows per rank with
// V_pad = V rounded up to a multiple of T (the padding rows are zero and masked).
// Every refusal is a ConfigError naming the constraint and a degree that would work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/model/config.h"

namespace origami::parallel {

enum class TokenLayoutKind { Full, Zigzag, Contiguous, Balanced };

// "zigzag", "contiguous", "balanced", "full"
TokenLayoutKind parse_token_layout(const std::string& name);
std::string token_layout_name(TokenLayoutKind kind);

// [begin, end) of an index range.
struct Range {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};

class TokenLayout {
 public:
  // Throws ConfigError when seq cannot be split this way over `degree` ranks. Balanced: the
  // assignment of one document per row (the micro-batch's comes from for_documents).
  TokenLayout(TokenLayoutKind kind, std::int64_t seq, int degree, int rank);
  // The balanced layout of one micro-batch: its chunks assigned by the document-masked work
  // of `batch` rows of document ids [batch, seq] (balanced_layout.h), the same on every rank.
  static TokenLayout balanced_for(std::int64_t seq, int degree, int rank,
                                  const std::int32_t* documents, std::int64_t batch);

  TokenLayoutKind kind() const { return kind_; }
  std::int64_t seq() const { return seq_; }
  int degree() const { return degree_; }
  int rank() const { return rank_; }
  // Positions held by this rank, in local row order.
  const std::vector<std::int64_t>& positions() const { return positions_; }
  std::int64_t local_seq() const { return static_cast<std::int64_t>(positions_.size()); }
  // Global positions of `rank`'s rows (any rank of the axis).
  std::vector<std::int64_t> positions_of(int rank) const;

  // Local rows [batch, local_seq] of a global [batch, seq] array.
  template <class T>
  std::vector<T> slice(const T* global, std::int64_t batch) const {
    std::vector<T> out(static_cast<std::size_t>(batch * local_seq()));
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t i = 0; i < local_seq(); ++i)
        out[static_cast<std::size_t>(b * local_seq() + i)] =
            global[b * seq_ + positions_[static_cast<std::size_t>(i)]];
    return out;
  }
  // Writes this rank's local rows (each `width` floats) into their places of a global
  // [batch, seq, width] array (the inverse of slice; used to assemble results).
  void scatter_rows(const float* local, std::int64_t batch, std::int64_t width,
                    float* global) const;

 private:
  TokenLayoutKind kind_;
  std::int64_t seq_;
  int degree_, rank_;
  std::vector<std::int64_t> chunk_order_;  // balanced: every rank's chunks, rank after rank
  std::vector<std::int64_t> positions_;
};

// Throws ConfigError unless seq splits over `degree` ranks in this layout; the message names
// the constraint and the nearest degree that works.
void check_token_split(TokenLayoutKind kind, std::int64_t seq, int degree);

// Equal contiguous range `index` of `parts` over [0, total); total % parts must hold (checked
// by the callers' validation, re-checked here).
Range even_range(std::int64_t total, int parts, int index);

// Refuses a tensor-parallel degree that does not divide the heads or the MLP width, or that
// neither divides the kv heads nor is a multiple of them (then each kv head is replicated).
void check_tensor_split(const ModelConfig& config, int degree, const std::string& axis_name);

// Ranks of a weight axis of `degree` holding each kv head: degree / Hkv when the degree exceeds
// the kv heads (Megatron's replication: rank r uses kv head r / replicas), else 1.
int kv_replicas(const ModelConfig& config, int degree);

// The kv heads a rank of that axis holds: Hkv / degree, or 1 when they are replicated.
std::int64_t kv_heads_per_rank(const ModelConfig& config, int degree);

// V rounded up to a multiple of `degree`.
std::int64_t padded_vocab(std::int64_t vocab, int degree);

// The largest divisor of n that is <= limit (a degree that would work), at least 1.
std::int64_t largest_divisor_at_most(std::int64_t n, std::int64_t limit);

}  // namespace origami::parallel
