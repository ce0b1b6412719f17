// Flash attention (forward, FlashAttention-2 backward, log-sum-exp merge) on explicit global
// positions with grouped-query attention. See attention.h for the contract.
//
// Tiling. A query block is `rows` consecutive query positions times the rep = H/Hkv query
// heads that share one kv head: rows*rep "virtual rows" of d values, so every K/V tile loaded
// is used by all the heads of its group. Keys go in tiles of kKeyTile. Scores exist only as one
// tile (virtual rows x keys) per thread. They are kept in base 2: q is pre-multiplied by
// scale*log2(e), so the softmax needs exp2 only, and lse = (m + log2 l) * ln 2. Every product
// is a register-blocked micro-kernel on packed tiles (attention_simd.h).
//   forward   S^T = K Q^T (keys x queries), so each query's running max and sum are vectors
//             down the columns; then O = alpha O + P V. Four query blocks share each copy of
//             a K/V tile.
//   backward  per (query block, key tile): S = Q K^T, P = exp2(S - lse), dP = dO V^T,
//             dS = P (dP - D) with D = rowsum(dO O), dV += P^T dO, dK += dS^T Q, dQ += dS K
//             (the scale and ln 2 factors folded in). Two key tiles share each packed query
//             block.
//
// Masking. Per tile pair, the min/max positions decide: no visible pair -> skipped before any
// packing; every pair visible -> no per-element check; otherwise an element-wise mask. A query
// that sees nothing keeps max = -inf and sum = 0: zero output, lse = -inf, and in backward its
// lse is taken as +inf so that its probabilities are exp2(-inf) = 0 (never inf - inf = NaN).
//
// Threads (thread_count() of the caller, never a process-wide pool):
//   forward   over (batch, kv head, group of query blocks): each writes its own out/lse rows.
//   backward  "fused" (FlashAttention-2): one thread owns a (batch, kv head) and walks key
//             tiles (outer) and query blocks (inner), so dK/dV tiles and dQ rows of that head
//             group have a single writer; used when the (batch, kv head) units split evenly
//             enough over the threads. Otherwise "split": dK/dV over (batch, kv head, key
//             tiles), then dQ over (batch, kv head, query block), which recomputes the scores
//             (1.4x the FLOPs, but every thread busy). Both modes add the same tile products
//             in the same order, so results are bitwise independent of the thread count and
//             of the mode, and no scratch proportional to the problem is needed.
#include "origami/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "origami/core/error.h"
#include "origami/kernels/attention_simd.h"
#include "origami/kernels/threads.h"

namespace origami::kernels {
namespace {

using attn::Init;
using attn::kLanes;
using attn::kNegInf;
using attn::tile_product;
using attn::VFloat;

constexpr std::int64_t kKeyTile = 256;  // keys per tile (a multiple of kLanes)
// Query rows x heads per query block: forward blocks are larger, since each key tile is read
// once per block; the backward's working set (five tiles) favours smaller ones.
constexpr std::int64_t kForwardRows = 128;
constexpr std::int64_t kForwardBlocksPerUnit = 4;  // query blocks sharing each K/V tile copy
constexpr std::int64_t kBackwardRows = 64;
constexpr std::int64_t kBackwardTilesPerUnit = 2;  // key tiles sharing each query-side pack
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;
constexpr std::int64_t kPosMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kPosMin = std::numeric_limits<std::int64_t>::min();

void check_shape(const AttentionShape& s) {
  ORIGAMI_CHECK(s.batch >= 0 && s.q_len >= 0 && s.kv_len >= 0,
                "attention: batch {}, q_len {} and kv_len {} must be >= 0", s.batch, s.q_len,
                s.kv_len);
  ORIGAMI_CHECK(s.heads >= 1 && s.kv_heads >= 1 && s.head_dim >= 1,
                "attention: heads {}, kv_heads {} and head_dim {} must be >= 1", s.heads,
                s.kv_heads, s.head_dim);
  ORIGAMI_CHECK(s.heads % s.kv_heads == 0,
                "attention: query heads {} must be a multiple of kv heads {}", s.heads, s.kv_heads);
}

void check_call(const AttentionShape& s, float scale, bool has_q, bool has_kv, bool has_pos) {
  check_shape(s);
  ORIGAMI_CHECK(std::isfinite(scale), "attention: scale must be finite, got {}", scale);
  ORIGAMI_CHECK(has_q || s.batch * s.q_len == 0, "attention: null query-side pointer");
  ORIGAMI_CHECK(has_kv || s.batch * s.kv_len == 0, "attention: null key/value-side pointer");
  ORIGAMI_CHECK(has_pos, "attention: null position pointer with q_len {} and kv_len {}", s.q_len,
                s.kv_len);
}

// Sizes derived once per call.
struct Geometry {
  AttentionShape s;
  std::int64_t rep = 1;         // query heads per kv head
  std::int64_t dp = kLanes;     // head_dim padded to whole vectors
  std::int64_t block_rows = 1;  // query positions per query block
  std::int64_t q_blocks = 0;
  std::int64_t k_tiles = 0;

  Geometry(const AttentionShape& shape, std::int64_t rows_target) : s(shape) {
    rep = s.heads / s.kv_heads;
    dp = attn::round_up_lanes(s.head_dim);
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
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
template <class T>
T* sized(std::vector<T>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// A query block: positions [i0, i0 + n) of sequence b, heads of kv head g; virtual row
// r = (i - i0) * rep + (h - g * rep).
struct QueryBlock {
  std::int64_t b = 0, g = 0, i0 = 0, n = 0, rows = 0;
  std::int64_t pmin = kPosMax, pmax = kPosMin;
};
QueryBlock query_block(const Geometry& G, const std::int64_t* q_pos, std::int64_t b, std::int64_t g,
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
  return blk;
}

// A key tile: keys [j0, j0 + n) of sequence b, kv head g, padded to np columns.
struct KeyTile {
  std::int64_t b = 0, g = 0, j0 = 0, n = 0, np = 0;
  std::int64_t pmin = kPosMax, pmax = kPosMin;
};
KeyTile key_tile(const Geometry& G, const std::int64_t* k_pos, std::int64_t b, std::int64_t g,
                 std::int64_t kt) {
  KeyTile t;
  t.b = b;
  t.g = g;
  t.j0 = kt * kKeyTile;
  t.n = std::min(kKeyTile, G.s.kv_len - t.j0);
  t.np = attn::round_up_lanes(t.n);
  for (std::int64_t j = t.j0; j < t.j0 + t.n; ++j) {
    t.pmin = std::min(t.pmin, k_pos[j]);
    t.pmax = std::max(t.pmax, k_pos[j]);
  }
  return t;
}
bool none_visible(const QueryBlock& q, const KeyTile& k) {
  return k.pmin > q.pmax;
}
bool all_visible(const QueryBlock& q, const KeyTile& k) {
  return k.pmax <= q.pmin;
}

// The tile cut after the last key the block can see: later keys are masked for every query
// of the block, so they are not computed at all (on sorted positions, most of the masked part
// of a diagonal tile). Keeps the tile's position range, so the element mask still applies.
KeyTile visible_part(const QueryBlock& q, const KeyTile& t, const std::int64_t* k_pos) {
  KeyTile v = t;
  if (all_visible(q, t)) return v;
  while (v.n > 0 && k_pos[t.j0 + v.n - 1] > q.pmax) --v.n;
  v.np = attn::round_up_lanes(v.n);
  return v;
}

// Virtual rows of a query-side tensor ([B, q_len, H, d]) times `mult`, zero-padded to dp.
void pack_query_rows(const Geometry& G, const QueryBlock& blk, const float* src, float mult,
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

// Key-side rows ([B, kv_len, Hkv, d]) transposed to [d, np], zero columns past n.
void pack_key_columns(const Geometry& G, const KeyTile& t, const float* src, float* dst) {
  const std::int64_t d = G.s.head_dim;
  for (std::int64_t j = 0; j < t.n; ++j) {
    const float* from = src + G.kv_offset(t.b, t.j0 + j, t.g);
    for (std::int64_t c = 0; c < d; ++c) dst[c * t.np + j] = from[c];
  }
  for (std::int64_t c = 0; c < d; ++c) std::fill(dst + c * t.np + t.n, dst + (c + 1) * t.np, 0.0f);
}

// Key-side rows as [n, dp], zero-padded columns.
void pack_key_rows(const Geometry& G, const KeyTile& t, const float* src, float* dst) {
  const std::int64_t d = G.s.head_dim;
  for (std::int64_t j = 0; j < t.n; ++j) {
    const float* from = src + G.kv_offset(t.b, t.j0 + j, t.g);
    std::copy(from, from + d, dst + j * G.dp);
    std::fill(dst + j * G.dp + d, dst + (j + 1) * G.dp, 0.0f);
  }
}

// Positions of the virtual rows of a query block.
void query_positions(const Geometry& G, const QueryBlock& blk, const std::int64_t* q_pos,
                     std::int64_t* dst) {
  for (std::int64_t r = 0; r < blk.rows; ++r) dst[r] = q_pos[blk.i0 + r / G.rep];
}

// scores[rows, np] = (scaled q) k^T for one tile pair, with invisible pairs and the padding
// columns set to -inf.
void tile_scores(const Geometry& G, const QueryBlock& blk, const KeyTile& t, const float* q,
                 const float* kt, std::int64_t ld_kt, const std::int64_t* qpos,
                 const std::int64_t* kpos, float* scores) {
  tile_product(blk.rows, t.np, G.s.head_dim, q, G.dp, 1, kt, ld_kt, scores, t.np, Init::Zero);
  const bool mask = !all_visible(blk, t);
  for (std::int64_t r = 0; r < blk.rows; ++r) {
    float* row = scores + r * t.np;
    if (mask) {
      const std::int64_t p = qpos[r];
      for (std::int64_t j = 0; j < t.n; ++j) row[j] = kpos[j] > p ? kNegInf : row[j];
    }
    std::fill(row + t.n, row + t.np, kNegInf);
  }
}

// ---------------------------------------------------------------------------------------------
// Forward

struct ForwardArgs {
  const float *q, *k, *v;
  const std::int64_t *q_pos, *k_pos;
  float scale;
  float *out, *lse;
};

// Query rows ([B, q_len, H, d]) of a block, transposed to [d, mp] and times `mult`; zero
// columns past the block's rows.
void pack_query_columns(const Geometry& G, const QueryBlock& blk, const float* src, float mult,
                        std::int64_t mp, float* dst) {
  const std::int64_t d = G.s.head_dim;
  for (std::int64_t i = 0; i < blk.n; ++i) {
    for (std::int64_t hh = 0; hh < G.rep; ++hh) {
      const float* from = src + G.q_offset(blk.b, blk.i0 + i, blk.g * G.rep + hh);
      const std::int64_t r = i * G.rep + hh;
      for (std::int64_t c = 0; c < d; ++c) dst[c * mp + r] = from[c] * mult;
    }
  }
  for (std::int64_t c = 0; c < d; ++c) std::fill(dst + c * mp + blk.rows, dst + (c + 1) * mp, 0.0f);
}

// Online-softmax update of one tile of transposed scores st [n keys, mp queries]: a query is a
// column, so its max and sum run down the rows and each vector holds 16 queries (no horizontal
// reductions). Scores become probabilities relative to the new running max; alpha rescales
// what was accumulated before.
void online_softmax_columns(std::int64_t n, std::int64_t mp, float* st, float* col_max,
                            float* col_sum, float* alpha) {
  const VFloat ninf = attn::splat(kNegInf);
  for (std::int64_t c = 0; c < mp; c += kLanes) {
    VFloat vm = ninf;
    for (std::int64_t j = 0; j < n; ++j) vm = attn::vmax(vm, attn::load(st + j * mp + c));
    const VFloat m_old = attn::load(col_max + c);
    const VFloat m_new = attn::vmax(m_old, vm);
    // A query that has seen no key yet keeps m = -inf; subtracting 0 then gives exp2(-inf) = 0.
    const VFloat shift = m_new == ninf ? VFloat{} : m_new;
    const VFloat a = m_old == ninf ? VFloat{} : attn::exp2_approx(m_old - m_new);
    VFloat sum{};
    for (std::int64_t j = 0; j < n; ++j) {
      const VFloat p = attn::exp2_approx(attn::load(st + j * mp + c) - shift);
      attn::store(st + j * mp + c, p);
      sum += p;
    }
    attn::store(col_sum + c, attn::load(col_sum + c) * a + sum);
    attn::store(col_max + c, m_new);
    attn::store(alpha + c, a);
  }
}

// Running state of one query block in the forward: Q^T, the output accumulator and the
// per-query max, sum and rescale factor.
struct ForwardBlock {
  QueryBlock blk;
  std::int64_t mp = 0;  // rows padded to whole vectors
  float *qt, *acc, *col_max, *col_sum, *alpha;
  std::int64_t* qpos;
};

// This block's share of one key tile (whose K and V rows are in krow, vrow).
void forward_block_tile(const Geometry& G, const ForwardArgs& a, ForwardBlock& f,
                        const KeyTile& tile, const float* krow, const float* vrow, float* st) {
  const std::int64_t rows = f.blk.rows, mp = f.mp, dp = G.dp;
  const KeyTile t = visible_part(f.blk, tile, a.k_pos);
  tile_product(t.n, mp, G.s.head_dim, krow, dp, 1, f.qt, mp, st, mp, Init::Zero);
  if (!all_visible(f.blk, t)) {
    const std::int64_t* kpos = a.k_pos + t.j0;
    for (std::int64_t j = 0; j < t.n; ++j) {
      float* row = st + j * mp;
      const std::int64_t p = kpos[j];
      for (std::int64_t r = 0; r < rows; ++r) row[r] = p > f.qpos[r] ? kNegInf : row[r];
    }
  }
  online_softmax_columns(t.n, mp, st, f.col_max, f.col_sum, f.alpha);
  // acc = alpha * acc + P V, with P(r, j) = st[j, r].
  tile_product(rows, dp, t.n, st, 1, mp, vrow, dp, f.acc, dp, Init::ScaleRows, f.alpha);
}

// Up to blocks_per_unit consecutive query blocks of one (sequence, kv head) against every
// key tile they can see. Scores are computed transposed, S^T = K (scaled Q)^T: Q^T is packed
// once per block; each K/V tile is copied contiguous once and used by all the blocks (the
// copy reads K/V from far memory: done per block, it took 19% of the forward at S = 4K).
void forward_unit(const Geometry& G, const ForwardArgs& a, std::int64_t b, std::int64_t g,
                  std::int64_t first_qb, std::int64_t blocks_per_unit) {
  Scratch& sc = scratch();
  const std::int64_t count = std::min(blocks_per_unit, G.q_blocks - first_qb);
  const std::int64_t max_rows = G.block_rows * G.rep, max_mp = attn::round_up_lanes(max_rows);
  const std::int64_t dp = G.dp, d = G.s.head_dim;
  float* qt = sized(sc.q, count * d * max_mp);
  float* acc = sized(sc.acc, count * max_rows * dp);
  float* col_max = sized(sc.row_max, count * max_mp);
  float* col_sum = sized(sc.row_sum, count * max_mp);
  float* alpha = sized(sc.alpha, count * max_mp);
  std::int64_t* qpos = sized(sc.qpos, count * max_rows);
  float* st = sized(sc.scores, kKeyTile * max_mp);
  float* krow = sized(sc.krow, kKeyTile * dp);
  float* vrow = sized(sc.vrow, kKeyTile * dp);

  ForwardBlock blocks[kForwardBlocksPerUnit];
  for (std::int64_t u = 0; u < count; ++u) {
    ForwardBlock& f = blocks[u];
    f.blk = query_block(G, a.q_pos, b, g, first_qb + u);
    f.mp = attn::round_up_lanes(f.blk.rows);
    f.qt = qt + u * d * max_mp;
    f.acc = acc + u * max_rows * dp;
    f.col_max = col_max + u * max_mp;
    f.col_sum = col_sum + u * max_mp;
    f.alpha = alpha + u * max_mp;
    f.qpos = qpos + u * max_rows;
    pack_query_columns(G, f.blk, a.q, a.scale * kLog2e, f.mp, f.qt);
    query_positions(G, f.blk, a.q_pos, f.qpos);
    std::fill(f.acc, f.acc + f.blk.rows * dp, 0.0f);
    std::fill(f.col_max, f.col_max + f.mp, kNegInf);
    std::fill(f.col_sum, f.col_sum + f.mp, 0.0f);
  }

  for (std::int64_t ti = 0; ti < G.k_tiles; ++ti) {
    const KeyTile t = key_tile(G, a.k_pos, b, g, ti);
    bool packed = false;
    for (std::int64_t u = 0; u < count; ++u) {
      if (none_visible(blocks[u].blk, t)) continue;
      if (!packed) {
        pack_key_rows(G, t, a.k, krow);
        pack_key_rows(G, t, a.v, vrow);
        packed = true;
      }
      forward_block_tile(G, a, blocks[u], t, krow, vrow, st);
    }
  }

  for (std::int64_t u = 0; u < count; ++u) {
    const ForwardBlock& f = blocks[u];
    for (std::int64_t r = 0; r < f.blk.rows; ++r) {
      const std::int64_t i = f.blk.i0 + r / G.rep, h = g * G.rep + r % G.rep;
      const float l = f.col_sum[r];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      float* o = a.out + G.q_offset(b, i, h);
      for (std::int64_t c = 0; c < d; ++c) o[c] = f.acc[r * dp + c] * inv;
      a.lse[G.lse_offset(b, h, i)] = l > 0.0f ? (f.col_max[r] + std::log2(l)) * kLn2 : kNegInf;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward

struct BackwardArgs {
  const float *q, *k, *v;
  const std::int64_t *q_pos, *k_pos;
  float scale;
  const float *out, *lse, *dout;
  float *dq, *dk, *dv;
};

// Query-side tiles of a block: scaled q, dO, lse in base 2 (+inf for rows that see no key, so
// that their probabilities are exp2(-inf) = 0), D = rowsum(dO * O), positions.
struct QuerySide {
  float *q, *dout, *lse2, *delta;
  std::int64_t* qpos;
};
QuerySide pack_query_side(const Geometry& G, const BackwardArgs& a, const QueryBlock& blk,
                          Scratch& sc) {
  const std::int64_t rows = blk.rows, dp = G.dp, d = G.s.head_dim;
  QuerySide qs{sized(sc.q, rows * dp), sized(sc.dout, rows * dp), sized(sc.lse2, rows),
               sized(sc.delta, rows), sized(sc.qpos, rows)};
  pack_query_rows(G, blk, a.q, a.scale * kLog2e, qs.q);
  pack_query_rows(G, blk, a.dout, 1.0f, qs.dout);
  query_positions(G, blk, a.q_pos, qs.qpos);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = blk.i0 + r / G.rep, h = blk.g * G.rep + r % G.rep;
    const float l = a.lse[G.lse_offset(blk.b, h, i)];
    qs.lse2[r] = l == kNegInf ? std::numeric_limits<float>::infinity() : l * kLog2e;
    // D = dO . O, in vectors (a scalar float sum is one serial chain of adds).
    const float* o = a.out + G.q_offset(blk.b, i, h);
    const float* dO = qs.dout + r * dp;
    VFloat acc{};
    std::int64_t c = 0;
    for (; c + kLanes <= d; c += kLanes) acc += attn::load(dO + c) * attn::load(o + c);
    float s = attn::hsum(acc);
    for (; c < d; ++c) s += dO[c] * o[c];
    qs.delta[r] = s;
  }
  return qs;
}

// Key-side tiles of a key tile: K^T and V^T for the score products, K rows for dQ.
struct KeySide {
  float *kt, *vt, *krow;
};
// Packs into the `slot`-th set of key-side buffers of the thread.
KeySide pack_key_side(const Geometry& G, const BackwardArgs& a, const KeyTile& t, Scratch& sc,
                      std::int64_t slot, bool want_dq) {
  const std::int64_t d = G.s.head_dim, slots = kBackwardTilesPerUnit;
  KeySide ks{sized(sc.kt, slots * d * kKeyTile) + slot * d * kKeyTile,
             sized(sc.vt, slots * d * kKeyTile) + slot * d * kKeyTile,
             sized(sc.krow, slots * kKeyTile * G.dp) + slot * kKeyTile * G.dp};
  pack_key_columns(G, t, a.k, ks.kt);
  pack_key_columns(G, t, a.v, ks.vt);
  if (want_dq) pack_key_rows(G, t, a.k, ks.krow);
  return ks;
}

// One (query block, key tile) pair of the backward. dk_tile/dv_tile ([n, dp]) accumulate the
// key-side gradients (dK still without its ln 2 factor); dQ rows are added to a.dq directly.
void backward_pair(const Geometry& G, const BackwardArgs& a, const QueryBlock& blk,
                   const QuerySide& qs, const KeyTile& tile, const KeySide& ks, Scratch& sc,
                   float* dk_tile, float* dv_tile, bool want_dq) {
  const KeyTile t = visible_part(blk, tile, a.k_pos);
  const std::int64_t rows = blk.rows, np = t.np, dp = G.dp, d = G.s.head_dim;
  float* p = sized(sc.scores, rows * kKeyTile);
  float* ds = sized(sc.dscores, rows * kKeyTile);

  // K^T and V^T are packed for the whole tile (leading dimension tile.np).
  tile_scores(G, blk, t, qs.q, ks.kt, tile.np, qs.qpos, a.k_pos + t.j0, p);
  // dP = dO V^T
  tile_product(rows, np, d, qs.dout, dp, 1, ks.vt, tile.np, ds, np, Init::Zero);
  for (std::int64_t r = 0; r < rows; ++r) {
    const VFloat shift = attn::splat(qs.lse2[r]);
    const VFloat delta = attn::splat(qs.delta[r]);
    float* prow = p + r * np;
    float* dsrow = ds + r * np;
    for (std::int64_t c = 0; c < np; c += kLanes) {
      const VFloat pv = attn::exp2_approx(attn::load(prow + c) - shift);
      attn::store(prow + c, pv);
      attn::store(dsrow + c, pv * (attn::load(dsrow + c) - delta));  // dS = P (dP - D)
    }
  }
  if (dk_tile != nullptr) {
    // dV += P^T dO ; dK += dS^T (scaled q)
    tile_product(t.n, dp, rows, p, 1, np, qs.dout, dp, dv_tile, dp, Init::Accumulate);
    tile_product(t.n, dp, rows, ds, 1, np, qs.q, dp, dk_tile, dp, Init::Accumulate);
  }
  if (want_dq) {
    // dQ += scale dS K, through a tile so that the padding columns are not written.
    float* dq_tile = sized(sc.acc, rows * dp);
    tile_product(rows, dp, t.n, ds, np, 1, ks.krow, dp, dq_tile, dp, Init::Zero);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* dst = a.dq + G.q_offset(blk.b, blk.i0 + r / G.rep, blk.g * G.rep + r % G.rep);
      const float* src = dq_tile + r * dp;
      for (std::int64_t c = 0; c < d; ++c) dst[c] += a.scale * src[c];
    }
  }
}

// All query blocks against up to kBackwardTilesPerUnit consecutive key tiles: their dK/dV are
// complete afterwards. Each query block's tiles (q, dO, D, lse) are packed once for all those
// key tiles (they come from far memory: packed per tile pair, they took 12% of the backward).
// With want_dq, dQ contributions are added on the way (the caller must own those dQ rows);
// each dQ row still receives its key tiles' contributions in increasing tile order.
void backward_key_tiles(const Geometry& G, const BackwardArgs& a, std::int64_t b, std::int64_t g,
                        std::int64_t first_tile, bool want_dq) {
  Scratch& sc = scratch();
  const std::int64_t count = std::min(kBackwardTilesPerUnit, G.k_tiles - first_tile);
  const std::int64_t dp = G.dp, d = G.s.head_dim, slots = kBackwardTilesPerUnit;
  float* dk_tiles = sized(sc.dk, slots * kKeyTile * dp);
  float* dv_tiles = sized(sc.dv, slots * kKeyTile * dp);
  KeyTile tiles[kBackwardTilesPerUnit];
  KeySide sides[kBackwardTilesPerUnit];
  bool packed[kBackwardTilesPerUnit] = {};
  for (std::int64_t u = 0; u < count; ++u) {
    tiles[u] = key_tile(G, a.k_pos, b, g, first_tile + u);
    std::fill(dk_tiles + u * kKeyTile * dp, dk_tiles + (u * kKeyTile + tiles[u].n) * dp, 0.0f);
    std::fill(dv_tiles + u * kKeyTile * dp, dv_tiles + (u * kKeyTile + tiles[u].n) * dp, 0.0f);
  }
  for (std::int64_t qb = 0; qb < G.q_blocks; ++qb) {
    const QueryBlock blk = query_block(G, a.q_pos, b, g, qb);
    bool q_packed = false;
    QuerySide qs{};
    for (std::int64_t u = 0; u < count; ++u) {
      if (none_visible(blk, tiles[u])) continue;
      if (!packed[u]) {
        sides[u] = pack_key_side(G, a, tiles[u], sc, u, want_dq);
        packed[u] = true;
      }
      if (!q_packed) {
        qs = pack_query_side(G, a, blk, sc);
        q_packed = true;
      }
      backward_pair(G, a, blk, qs, tiles[u], sides[u], sc, dk_tiles + u * kKeyTile * dp,
                    dv_tiles + u * kKeyTile * dp, want_dq);
    }
  }
  for (std::int64_t u = 0; u < count; ++u) {
    if (!packed[u]) continue;
    const KeyTile& t = tiles[u];
    const float* dk_tile = dk_tiles + u * kKeyTile * dp;
    const float* dv_tile = dv_tiles + u * kKeyTile * dp;
    for (std::int64_t j = 0; j < t.n; ++j) {
      float* dkr = a.dk + G.kv_offset(b, t.j0 + j, g);
      float* dvr = a.dv + G.kv_offset(b, t.j0 + j, g);
      for (std::int64_t c = 0; c < d; ++c) {
        dkr[c] += kLn2 * dk_tile[j * dp + c];  // undo the log2(e) folded into q
        dvr[c] += dv_tile[j * dp + c];
      }
    }
  }
}

// dQ of one query block against all key tiles (the split mode's second pass).
void backward_query_block(const Geometry& G, const BackwardArgs& a, std::int64_t b, std::int64_t g,
                          std::int64_t qb) {
  Scratch& sc = scratch();
  const QueryBlock blk = query_block(G, a.q_pos, b, g, qb);
  bool packed = false;
  QuerySide qs{};
  for (std::int64_t ti = 0; ti < G.k_tiles; ++ti) {
    const KeyTile t = key_tile(G, a.k_pos, b, g, ti);
    if (none_visible(blk, t)) continue;
    if (!packed) {
      qs = pack_query_side(G, a, blk, sc);
      packed = true;
    }
    const KeySide ks = pack_key_side(G, a, t, sc, 0, true);
    backward_pair(G, a, blk, qs, t, ks, sc, nullptr, nullptr, true);
  }
}

// Fused mode when the (batch, kv head) units keep at least 3/4 of the threads busy.
bool use_fused_backward(std::int64_t units, int threads) {
  if (threads <= 1) return true;
  const std::int64_t rounds = (units + threads - 1) / threads;
  return 4 * units >= 3 * rounds * threads;
}

}  // namespace

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, float scale,
                       float* out, float* lse) {
  check_call(s, scale, q != nullptr && out != nullptr && lse != nullptr,
             k != nullptr && v != nullptr,
             (q_pos != nullptr || s.q_len == 0) && (k_pos != nullptr || s.kv_len == 0));
  const Geometry G(s, kForwardRows);
  const ForwardArgs a{q, k, v, q_pos, k_pos, scale, out, lse};
  const int threads = thread_count();
  // Fewer query blocks per unit when the problem is small, so that every thread gets about
  // eight units to balance the causal mask's uneven work (grouping blocks only shares K/V
  // copies: it does not change any result).
  std::int64_t per_unit = kForwardBlocksPerUnit, per_bg = 0, units = 0;
  while (true) {
    per_bg = (G.q_blocks + per_unit - 1) / per_unit;
    units = s.batch * s.kv_heads * per_bg;
    if (per_unit == 1 || units >= 8 * threads) break;
    per_unit /= 2;
  }
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (threads > 1)
  for (std::int64_t u = 0; u < units; ++u) {
    const std::int64_t bg = u / per_bg;
    forward_unit(G, a, bg / s.kv_heads, bg % s.kv_heads, (u % per_bg) * per_unit, per_unit);
  }
}

void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const std::int64_t* q_pos, const std::int64_t* k_pos, float scale,
                        const float* out, const float* lse, const float* dout, float* dq, float* dk,
                        float* dv) {
  check_call(s, scale,
             q != nullptr && out != nullptr && lse != nullptr && dout != nullptr && dq != nullptr,
             k != nullptr && v != nullptr && dk != nullptr && dv != nullptr,
             (q_pos != nullptr || s.q_len == 0) && (k_pos != nullptr || s.kv_len == 0));
  const Geometry G(s, kBackwardRows);
  const BackwardArgs a{q, k, v, q_pos, k_pos, scale, out, lse, dout, dq, dk, dv};
  const std::int64_t units = s.batch * s.kv_heads;
  const int threads = thread_count();
  if (use_fused_backward(units, threads)) {
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (threads > 1)
    for (std::int64_t u = 0; u < units; ++u) {
      for (std::int64_t ti = 0; ti < G.k_tiles; ti += kBackwardTilesPerUnit) {
        backward_key_tiles(G, a, u / s.kv_heads, u % s.kv_heads, ti, true);
      }
    }
    return;
  }
  const std::int64_t per_bg = (G.k_tiles + kBackwardTilesPerUnit - 1) / kBackwardTilesPerUnit;
  const std::int64_t key_units = units * per_bg;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t u = 0; u < key_units; ++u) {
    const std::int64_t bg = u / per_bg;
    backward_key_tiles(G, a, bg / s.kv_heads, bg % s.kv_heads, (u % per_bg) * kBackwardTilesPerUnit,
                       false);
  }
  const std::int64_t query_units = units * G.q_blocks;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t u = 0; u < query_units; ++u) {
    const std::int64_t qb = u % G.q_blocks, bg = u / G.q_blocks;
    backward_query_block(G, a, bg / s.kv_heads, bg % s.kv_heads, qb);
  }
}

void attention_merge(std::int64_t batch, std::int64_t q_len, std::int64_t heads,
                     std::int64_t head_dim, float* out_a, float* lse_a, const float* out_b,
                     const float* lse_b) {
  ORIGAMI_CHECK(batch >= 0 && q_len >= 0 && heads >= 1 && head_dim >= 1,
                "attention_merge: batch {}, q_len {} must be >= 0 and heads {}, head_dim {} >= 1",
                batch, q_len, heads, head_dim);
  if (batch * q_len == 0) return;
  ORIGAMI_CHECK(out_a != nullptr && lse_a != nullptr && out_b != nullptr && lse_b != nullptr,
                "attention_merge: null pointer");
  const std::int64_t rows = batch * q_len * heads;
  const int threads = thread_count();
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t h = row % heads, i = (row / heads) % q_len, b = row / heads / q_len;
    float& la = lse_a[(b * heads + h) * q_len + i];
    const float lb = lse_b[(b * heads + h) * q_len + i];
    float* oa = out_a + row * head_dim;
    const float* ob = out_b + row * head_dim;
    const float m = std::max(la, lb);
    if (m == kNegInf) {  // neither side saw a key
      std::fill(oa, oa + head_dim, 0.0f);
      la = kNegInf;
      continue;
    }
    const float wa = std::exp(la - m), wb = std::exp(lb - m);  // one of them is exactly 1
    const float inv = 1.0f / (wa + wb);
    // A side with weight 0 is skipped rather than multiplied, so nothing in its rows leaks.
    for (std::int64_t c = 0; c < head_dim; ++c) {
      const float a_part = wa == 0.0f ? 0.0f : wa * oa[c];
      const float b_part = wb == 0.0f ? 0.0f : wb * ob[c];
      oa[c] = (a_part + b_part) * inv;
    }
    la = m + std::log(wa + wb);
  }
}

double attention_forward_flops(const AttentionShape& s, const std::int64_t* q_pos,
                               const std::int64_t* k_pos) {
  check_shape(s);
  if (s.q_len == 0 || s.kv_len == 0) return 0.0;
  ORIGAMI_CHECK(q_pos != nullptr && k_pos != nullptr, "attention_forward_flops: null positions");
  // Visible pairs: for each query, the keys at or before it, by binary search on sorted keys.
  std::vector<std::int64_t> keys(k_pos, k_pos + s.kv_len);
  std::sort(keys.begin(), keys.end());
  double pairs = 0.0;
  for (std::int64_t i = 0; i < s.q_len; ++i) {
    pairs +=
        static_cast<double>(std::upper_bound(keys.begin(), keys.end(), q_pos[i]) - keys.begin());
  }
  return 4.0 * static_cast<double>(s.head_dim) * static_cast<double>(s.heads) *
         static_cast<double>(s.batch) * pairs;
}

}  // namespace origami::kernels
