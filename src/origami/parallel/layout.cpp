#include "origami/parallel/layout.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "origami/core/error.h"
#include "origami/core/float_ops.h"
#include "origami/parallel/balanced_layout.h"

namespace origami::parallel {

TokenLayoutKind parse_token_layout(const std::string& name) {
  if (name == "zigzag") return TokenLayoutKind::Zigzag;
  if (name == "contiguous") return TokenLayoutKind::Contiguous;
  if (name == "balanced") return TokenLayoutKind::Balanced;
  if (name == "full") return TokenLayoutKind::Full;
  throw ConfigError(
      fmt::format("unknown token layout '{}'; use zigzag, contiguous or balanced", name));
}

std::string token_layout_name(TokenLayoutKind kind) {
  switch (kind) {
    case TokenLayoutKind::Zigzag:
      return "zigzag";
    case TokenLayoutKind::Contiguous:
      return "contiguous";
    case TokenLayoutKind::Balanced:
      return "balanced";
    case TokenLayoutKind::Full:
      return "full";
  }
  return "?";
}

std::int64_t largest_divisor_at_most(std::int64_t n, std::int64_t limit) {
  for (std::int64_t d = std::min(n, limit); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

void check_token_split(TokenLayoutKind kind, std::int64_t seq, int degree) {
  if (degree < 1) throw ConfigError(fmt::format("a sequence degree must be >= 1 (got {})", degree));
  if (kind == TokenLayoutKind::Full) return;
  // Balanced folds like zigzag: at least 2D chunks (balanced_layout.h).
  const bool folded = kind == TokenLayoutKind::Zigzag || kind == TokenLayoutKind::Balanced;
  const std::int64_t chunks = folded ? 2 * std::int64_t{degree} : degree;
  if (seq % chunks == 0) return;
  // A degree that works: the largest d <= degree with seq % (chunks per rank * d) == 0.
  std::int64_t works = 1;
  for (std::int64_t d = degree; d >= 1; --d) {
    if (seq % (folded ? 2 * d : d) == 0) {
      works = d;
      break;
    }
  }
  if (folded) {
    throw ConfigError(fmt::format(
        "{} layout needs the sequence length divisible by 2 x degree: {} % (2 x {}) = {}; "
        "use a sequence length that is a multiple of {} or degree {}{}",
        token_layout_name(kind), seq, degree, seq % chunks, chunks, works,
        seq % 2 == 0 ? ""
                     : " (an odd length cannot be zigzagged at all: try --layout contiguous)"));
  }
  throw ConfigError(fmt::format(
      "contiguous layout needs the sequence length divisible by the degree: {} % {} = {}; use "
      "a multiple of {} or degree {}",
      seq, degree, seq % chunks, degree, works));
}

TokenLayout::TokenLayout(TokenLayoutKind kind, std::int64_t seq, int degree, int rank)
    : kind_(kind), seq_(seq), degree_(degree), rank_(rank) {
  ORIGAMI_CHECK(seq >= 1, "sequence length must be >= 1 (got {})", seq);
  check_token_split(kind, seq, degree);
  ORIGAMI_CHECK(rank >= 0 && rank < degree, "rank {} outside an axis of {}", rank, degree);
  if (kind == TokenLayoutKind::Balanced)
    chunk_order_ = assign_balanced_chunks(
        chunk_attention_work(nullptr, 1, seq, balanced_chunk_count(seq, degree)), degree);
  positions_ = positions_of(rank);
}

TokenLayout TokenLayout::balanced_for(std::int64_t seq, int degree, int rank,
                                      const std::int32_t* documents, std::int64_t batch) {
  TokenLayout out(TokenLayoutKind::Balanced, seq, degree, rank);
  out.chunk_order_ = assign_balanced_chunks(
      chunk_attention_work(documents, batch, seq, balanced_chunk_count(seq, degree)), degree);
  out.positions_ = out.positions_of(rank);
  return out;
}

std::vector<std::int64_t> TokenLayout::positions_of(int r) const {
  std::vector<std::int64_t> p;
  auto add = [&](std::int64_t begin, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) p.push_back(begin + i);
  };
  switch (kind_) {
    case TokenLayoutKind::Full:
      add(0, seq_);
      break;
    case TokenLayoutKind::Contiguous: {
      const std::int64_t n = seq_ / degree_;
      add(r * n, n);
      break;
    }
    case TokenLayoutKind::Zigzag: {
      const std::int64_t c = seq_ / (2 * std::int64_t{degree_});
      add(r * c, c);
      add((2 * std::int64_t{degree_} - 1 - r) * c, c);
      break;
    }
    case TokenLayoutKind::Balanced: {
      const auto chunks = static_cast<std::int64_t>(chunk_order_.size());
      const std::int64_t c = seq_ / chunks, per = chunks / degree_;
      for (std::int64_t i = 0; i < per; ++i)
        add(chunk_order_[static_cast<std::size_t>(r * per + i)] * c, c);
      break;
    }
  }
  return p;
}

void TokenLayout::scatter_rows(const float* local, std::int64_t batch, std::int64_t width,
                               float* global) const {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < local_seq(); ++i)
      copy_floats(float_at(global, (b * seq_ + positions_[static_cast<std::size_t>(i)]) * width),
                  float_at(local, (b * local_seq() + i) * width), width);
}

Range even_range(std::int64_t total, int parts, int index) {
  ORIGAMI_CHECK(parts >= 1 && total % parts == 0 && index >= 0 && index < parts,
                "cannot take part {} of {} equal parts of {}", index, parts, total);
  const std::int64_t n = total / parts;
  return {index * n, (index + 1) * n};
}

namespace {
// Whether `degree` can shard the kv heads: it divides them, or each is replicated over
// degree / Hkv ranks.
bool kv_split_works(std::int64_t kv_heads, std::int64_t degree) {
  return kv_heads % degree == 0 || degree % kv_heads == 0;
}
}  // namespace

void check_tensor_split(const ModelConfig& c, int degree, const std::string& axis) {
  if (degree < 1) throw ConfigError(fmt::format("{} degree must be >= 1 (got {})", axis, degree));
  // One suggestion for every refusal: the largest degree that passes all three checks, so
  // that the degree suggested is never refused by the next check.
  std::int64_t works = 1;
  for (std::int64_t d = degree; d > 1 && works == 1; --d)
    if (c.num_attention_heads % d == 0 && c.intermediate_size % d == 0 &&
        kv_split_works(c.num_key_value_heads, d))
      works = d;
  auto need = [&](std::int64_t n, const char* what) {
    if (n % degree == 0) return;
    throw ConfigError(fmt::format("{} degree {} must divide the number of {} ({}); the largest "
                                  "degree that works is {}",
                                  axis, degree, what, n, works));
  };
  need(c.num_attention_heads, "attention heads (num_attention_heads)");
  if (!kv_split_works(c.num_key_value_heads, degree))
    throw ConfigError(fmt::format(
        "{} degree {} must divide the number of key/value heads (num_key_value_heads, {}) or be "
        "a multiple of it (each kv head then replicated over degree / kv heads ranks); the "
        "largest degree that works is {}",
        axis, degree, c.num_key_value_heads, works));
  need(c.intermediate_size, "MLP columns (intermediate_size)");
}

int kv_replicas(const ModelConfig& c, int degree) {
  return degree > c.num_key_value_heads ? static_cast<int>(degree / c.num_key_value_heads) : 1;
}

std::int64_t kv_heads_per_rank(const ModelConfig& c, int degree) {
  return degree > c.num_key_value_heads ? 1 : c.num_key_value_heads / degree;
}

std::int64_t padded_vocab(std::int64_t vocab, int degree) {
  return (vocab + degree - 1) / degree * degree;
}

}  // namespace origami::parallel
