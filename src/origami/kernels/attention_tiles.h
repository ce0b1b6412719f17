// Private to the attention kernels (attention.cpp, attention_backward.cpp): the geometry of
// one call, tiles of queries and keys with their position and document ranges, and packing into per-thread
// buffers; target-independent (the vector code is in attention_simd-inl.h). Layouts and
// conventions: attention.h and attention.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "origami/core/error.h"
#include "origami/kernels/attention.h"

namespace origami::kernels::attn {

// Tile rows and columns are padded to a multiple of 16 floats: one AVX-512 vector, and whole
// vectors on every narrower target.
constexpr std::int64_t kTilePad = 16;
inline std::int64_t round_up_pad(std::int64_t n) { return (n + kTilePad - 1) / kTilePad * kTilePad; }

constexpr std::int64_t kKeyTile = 256;  // keys per tile (a multiple of kTilePad)
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;
constexpr std::int64_t kPosMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kPosMin = std::numeric_limits<std::int64_t>::min();
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline void check_shape(const AttentionShape& s) {
  ORIGAMI_CHECK(s.batch >= 0 && s.q_len >= 0 && s.kv_len >= 0,
                "attention: batch {}, q_len {} and kv_len {} must be >= 0", s.batch, s.q_len,
                s.kv_len);
  ORIGAMI_CHECK(s.heads >= 1 && s.kv_heads >= 1 && s.head_dim >= 1,
                "attention: heads {}, kv_heads {} and head_dim {} must be >= 1", s.heads,
                s.kv_heads, s.head_dim);
  ORIGAMI_CHECK(s.heads % s.kv_heads == 0,
                "attention: query heads {} must be a multiple of kv heads {}", s.heads, s.kv_heads);
}

inline void check_call(const AttentionShape& s, float scale, bool has_q, bool has_kv,
                       bool has_pos) {
  check_shape(s);
  ORIGAMI_CHECK(std::isfinite(scale), "attention: scale must be finite, got {}", scale);
  ORIGAMI_CHECK(has_q || s.batch * s.q_len == 0, "attention: null query-side pointer");
  ORIGAMI_CHECK(has_kv || s.batch * s.kv_len == 0, "attention: null key/value-side pointer");
  ORIGAMI_CHECK(has_pos, "attention: null position pointer with q_len {} and kv_len {}", s.q_len,
                s.kv_len);
}

// Query rows x heads per query block: the forward's, and the backward's (smaller: its working
// set holds five tiles).
constexpr std::int64_t kForwardRows = 128;
constexpr std::int64_t kBackwardRows = 64;
constexpr std::int64_t kForwardBlocksPerUnit = 4;  // query blocks sharing each K/V tile copy
constexpr std::int64_t kBackwardTilesPerUnit = 2;  // key tiles sharing each query-side pack

// The arguments of one call, as the per-target code receives them.
struct ForwardArgs {
  const float *q, *k, *v;
  const std::int64_t *q_pos, *k_pos;
  float scale;
  float *out, *lse;
  AttentionDocs docs;
};
struct BackwardArgs {
  const float *q, *k, *v;
  const std::int64_t *q_pos, *k_pos;
  float scale;
  const float *out, *lse, *dout;
  float *dq, *dk, *dv;
  AttentionDocs docs;
};

// Both document arrays or neither.
inline void check_docs(const AttentionShape& s, const AttentionDocs& docs) {
  ORIGAMI_CHECK(!docs.any() || ((docs.q_doc != nullptr || s.batch * s.q_len == 0) &&
                                (docs.k_doc != nullptr || s.batch * s.kv_len == 0)),
                "attention: document ids given for only one of queries and keys");
}

// Sizes derived once per call.
struct Geometry {
  AttentionShape s;
  std::int64_t rep = 1;         // query heads per kv head
  std::int64_t dp = kTilePad;    // head_dim padded to whole vectors
  std::int64_t block_rows = 1;  // query positions per query block
  std::int64_t q_blocks = 0;
  std::int64_t k_tiles = 0;

  Geometry(const AttentionShape& shape, std::int64_t rows_target) : s(shape) {
    rep = s.heads / s.kv_heads;
    dp = round_up_pad(s.head_dim);
    block_rows = std::max<std::int64_t>(1, rows_target / rep);
    q_blocks = (s.q_len + block_rows - 1) / block_rows;
    k_tiles = (s.kv_len + kKeyTile - 1) / kKeyTile;
  }
  // Offset of head h of query row i of sequence b in q/out/dq ([B, q_len, H, d]).
  std::int64_t q_offset(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return ((b * s.q_len + i) * s.heads + h) * s.head_dim;
  }
  std::int64_t kv_offset(std::int64_t b, std::int64_t j, std::int64_t g) const {
    return ((b * s.kv_len + j) * s.kv_heads + g) * s.head_dim;
  }
  std::int64_t lse_offset(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return (b * s.heads + h) * s.q_len + i;
  }
};

// Per-thread tile buffers, grown on first use and kept: their size depends on d only, never on
// the sequence (at d = 64 about 0.5 MiB for the forward, 0.8 MiB for the backward, sized to
// stay within the 1 MiB L2 cache of the machine measured).
struct Scratch {
  std::vector<float> q, dout, kt, vt, krow, vrow, scores, dscores, acc, dk, dv;
  std::vector<float> row_max, row_sum, alpha, lse2, delta;
  std::vector<std::int64_t> qpos;
  std::vector<std::int32_t> qdoc;
  std::vector<std::int64_t> key_end, row_key_end, query_begin;  // the trims of one tile pair
};
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
template <class T>
inline T* sized(std::vector<T>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// The document range [dmin, dmax] of ids[0, n) (null: one document, 0).
struct DocRange {
  std::int32_t dmin = 0, dmax = 0;
};
inline DocRange doc_range(const std::int32_t* ids, std::int64_t n) {
  if (ids == nullptr || n == 0) return {};
  const auto [lo, hi] = std::minmax_element(ids, ids + n);
  return {*lo, *hi};
}

// A query block: positions [i0, i0 + n) of sequence b, heads of kv head g; virtual row
// r = (i - i0) * rep + (h - g * rep). docs: its document ids (null: one document).
struct QueryBlock {
  std::int64_t b = 0, g = 0, i0 = 0, n = 0, rows = 0;
  std::int64_t pmin = kPosMax, pmax = kPosMin;
  const std::int32_t* docs = nullptr;
  DocRange d;
};
inline QueryBlock query_block(const Geometry& G, const std::int64_t* q_pos,
                              const AttentionDocs& docs, std::int64_t b, std::int64_t g,
                              std::int64_t qb) {
  QueryBlock blk;
  blk.b = b;
  blk.g = g;
  blk.i0 = qb * G.block_rows;
  blk.n = std::min(G.block_rows, G.s.q_len - blk.i0);
  blk.rows = blk.n * G.rep;
  for (std::int64_t i = blk.i0; i < blk.i0 + blk.n; ++i) {
    blk.pmin = std::min(blk.pmin, q_pos[i]);
    blk.pmax = std::max(blk.pmax, q_pos[i]);
  }
  if (docs.q_doc != nullptr) blk.docs = docs.q_doc + b * G.s.q_len + blk.i0;
  blk.d = doc_range(blk.docs, blk.n);
  return blk;
}

// A key tile: keys [j0, j0 + n) of sequence b, kv head g, padded to np columns; docs: their
// document ids (null: one document).
struct KeyTile {
  std::int64_t b = 0, g = 0, j0 = 0, n = 0, np = 0;
  std::int64_t pmin = kPosMax, pmax = kPosMin;
  const std::int32_t* docs = nullptr;
  DocRange d;
};
inline KeyTile key_tile(const Geometry& G, const std::int64_t* k_pos, const AttentionDocs& docs,
                        std::int64_t b, std::int64_t g, std::int64_t kt) {
  KeyTile t;
  t.b = b;
  t.g = g;
  t.j0 = kt * kKeyTile;
  t.n = std::min(kKeyTile, G.s.kv_len - t.j0);
  t.np = round_up_pad(t.n);
  for (std::int64_t j = t.j0; j < t.j0 + t.n; ++j) {
    t.pmin = std::min(t.pmin, k_pos[j]);
    t.pmax = std::max(t.pmax, k_pos[j]);
  }
  if (docs.k_doc != nullptr) t.docs = docs.k_doc + b * G.s.kv_len + t.j0;
  t.d = doc_range(t.docs, t.n);
  return t;
}
// No pair visible: every key after every query, or document ranges that do not meet (the
// tile skipping that makes packed documents cheap).
inline bool none_visible(const QueryBlock& q, const KeyTile& k) {
  return k.pmin > q.pmax || k.d.dmax < q.d.dmin || k.d.dmin > q.d.dmax;
}
// Every pair visible: causally, and all of one and the same document.
inline bool all_visible(const QueryBlock& q, const KeyTile& k) {
  return k.pmax <= q.pmin && q.d.dmin == q.d.dmax && k.d.dmin == k.d.dmax && q.d.dmin == k.d.dmin;
}

// Keys [from, to) of tile t, with their own position and document ranges.
inline KeyTile key_subtile(const KeyTile& t, std::int64_t from, std::int64_t to,
                           const std::int64_t* k_pos) {
  KeyTile v = t;
  v.j0 = t.j0 + from;
  v.n = to - from;
  v.np = round_up_pad(v.n);
  v.pmin = kPosMax;
  v.pmax = kPosMin;
  for (std::int64_t j = v.j0; j < v.j0 + v.n; ++j) {
    v.pmin = std::min(v.pmin, k_pos[j]);
    v.pmax = std::max(v.pmax, k_pos[j]);
  }
  if (t.docs != nullptr) v.docs = t.docs + from;
  v.d = doc_range(v.docs, v.n);
  return v;
}

// The tile cut to the keys the block can see: later keys (after every query, or of a later
// document than any query's) and earlier ones (of an earlier document than any query's) are
// masked for every query of the block, so they are neither computed nor read (on sorted
// positions, most of the masked part of a diagonal tile; with packed documents, the keys of
// the documents before the block's in a tile it shares with them). Its ranges are its own, so
// a part that is all visible needs no element mask.
inline KeyTile visible_part(const QueryBlock& q, const KeyTile& t, const std::int64_t* k_pos) {
  if (all_visible(q, t)) return t;
  std::int64_t end = t.n, begin = 0;
  while (end > 0 && (k_pos[t.j0 + end - 1] > q.pmax ||
                     (t.docs != nullptr && t.docs[end - 1] > q.d.dmax)))
    --end;
  if (t.docs != nullptr) {
    while (begin < end && t.docs[begin] < q.d.dmin) ++begin;
  }
  return key_subtile(t, begin, end, k_pos);
}

// How many leading keys of t every query of the block sees (they need no element mask).
inline std::int64_t keys_seen_by_all(const QueryBlock& q, const KeyTile& t,
                                     const std::int64_t* k_pos) {
  const bool one_doc = q.d.dmin == q.d.dmax;
  std::int64_t j = 0;
  while (j < t.n && k_pos[t.j0 + j] <= q.pmin &&
         (t.docs == nullptr || (one_doc && t.docs[j] == q.d.dmin)))
    ++j;
  return j;
}

// 1 + the last key of t that a query at position qpos of document qdoc (or any of several
// queries, given their largest position and document) may see: the keys after it are hidden
// from that query whatever the order of positions and documents.
inline std::int64_t key_end_for(const KeyTile& t, const std::int64_t* k_pos, std::int64_t qpos,
                                std::int32_t qdoc) {
  std::int64_t end = t.n;
  while (end > 0 && (k_pos[t.j0 + end - 1] > qpos || (t.docs != nullptr && t.docs[end - 1] > qdoc)))
    --end;
  return end;
}

// Whether key j of tile t is hidden from a query at position qpos of document qdoc.
inline bool masked(const KeyTile& t, const std::int64_t* kpos, std::int64_t j, std::int64_t qpos,
                   std::int32_t qdoc) {
  return kpos[j] > qpos || (t.docs != nullptr && t.docs[j] != qdoc);
}

// Virtual rows of a query-side tensor ([B, q_len, H, d]) times `mult`, zero-padded to dp.
inline void pack_query_rows(const Geometry& G, const QueryBlock& blk, const float* src, float mult,
                            float* dst) {
  const std::int64_t d = G.s.head_dim;
  for (std::int64_t i = 0; i < blk.n; ++i) {
    for (std::int64_t hh = 0; hh < G.rep; ++hh) {
      const float* from = src + G.q_offset(blk.b, blk.i0 + i, blk.g * G.rep + hh);
      float* to = dst + (i * G.rep + hh) * G.dp;
      for (std::int64_t c = 0; c < d; ++c) to[c] = from[c] * mult;
      std::fill(to + d, to + G.dp, 0.0f);
    }
  }
}

// dst[c * ld + j] = row(j)[c] * mult for j < n, c < d: a transpose in blocks of kTilePad
// rows, so that the source lines of a block stay in L1 and each destination run is written
// at once (written column by column, destination rows 1 KiB apart thrashed L1's sets: the
// key transposes took 14% of the backward at S = 1K, the query one 12% of the forward).
template <class RowOf>
inline void transpose_rows(std::int64_t n, std::int64_t d, RowOf row, float mult, float* dst,
                           std::int64_t ld) {
  for (std::int64_t j0 = 0; j0 < n; j0 += kTilePad) {
    const std::int64_t m = std::min(kTilePad, n - j0);
    const float* from[kTilePad];
    for (std::int64_t jj = 0; jj < m; ++jj) from[jj] = row(j0 + jj);
    for (std::int64_t c = 0; c < d; ++c) {
      float* to = dst + c * ld + j0;
      for (std::int64_t jj = 0; jj < m; ++jj) to[jj] = from[jj][c] * mult;
    }
  }
}

// Key-side rows ([B, kv_len, Hkv, d]) transposed to [d, np], zero columns past n.
inline void pack_key_columns(const Geometry& G, const KeyTile& t, const float* src, float* dst) {
  const std::int64_t d = G.s.head_dim;
  transpose_rows(
      t.n, d, [&](std::int64_t j) { return src + G.kv_offset(t.b, t.j0 + j, t.g); }, 1.0f, dst,
      t.np);
  for (std::int64_t c = 0; c < d; ++c) std::fill(dst + c * t.np + t.n, dst + (c + 1) * t.np, 0.0f);
}

// Key-side rows as [n, dp], zero-padded columns.
inline void pack_key_rows(const Geometry& G, const KeyTile& t, const float* src, float* dst) {
  const std::int64_t d = G.s.head_dim;
  for (std::int64_t j = 0; j < t.n; ++j) {
    const float* from = src + G.kv_offset(t.b, t.j0 + j, t.g);
    std::copy(from, from + d, dst + j * G.dp);
    std::fill(dst + j * G.dp + d, dst + (j + 1) * G.dp, 0.0f);
  }
}

// Positions of the virtual rows of a query block.
inline void query_positions(const Geometry& G, const QueryBlock& blk, const std::int64_t* q_pos,
                            std::int64_t* dst) {
  for (std::int64_t r = 0; r < blk.rows; ++r) dst[r] = q_pos[blk.i0 + r / G.rep];
}
// Document ids of the virtual rows of a query block (0 without documents).
inline void query_documents(const Geometry& G, const QueryBlock& blk, std::int32_t* dst) {
  for (std::int64_t r = 0; r < blk.rows; ++r)
    dst[r] = blk.docs == nullptr ? 0 : blk.docs[r / G.rep];
}

}  // namespace origami::kernels::attn
