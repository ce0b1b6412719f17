// FlashAttention-2 backward of attention.cpp's forward: the tiling, the fused and split
// parallel modes and the handling of masked rows are described at the top of attention.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "origami/core/dry_run.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/attention_tiles.h"
#include "origami/kernels/threads.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/attention_backward.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/attention_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::attn::HWY_NAMESPACE {

// Query-side tiles of a block: scaled q, dO, lse in base 2 (+inf for rows that see no key, so
// that their probabilities are exp2(-inf) = 0), D = rowsum(dO * O), positions.
struct QuerySide {
  float *q, *dout, *lse2, *delta;
  std::int64_t* qpos;
  std::int32_t* qdoc;
};
QuerySide pack_query_side(const Geometry& G, const BackwardArgs& a, const QueryBlock& blk,
                          Scratch& sc) {
  const std::int64_t rows = blk.rows, dp = G.dp, d = G.s.head_dim;
  QuerySide qs{sized(sc.q, rows * dp), sized(sc.dout, rows * dp), sized(sc.lse2, rows),
               sized(sc.delta, rows), sized(sc.qpos, rows), sized(sc.qdoc, rows)};
  pack_query_rows(G, blk, a.q, a.scale * kLog2e, qs.q);
  pack_query_rows(G, blk, a.dout, 1.0f, qs.dout);
  query_positions(G, blk, a.q_pos, qs.qpos);
  query_documents(G, blk, qs.qdoc);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = blk.i0 + r / G.rep, h = blk.g * G.rep + r % G.rep;
    const float l = a.lse[G.lse_offset(blk.b, h, i)];
    qs.lse2[r] = l == kNegInf ? std::numeric_limits<float>::infinity() : l * kLog2e;
    // D = dO . O, in vectors (a scalar float sum is one serial chain of adds).
    const float* o = a.out + G.q_offset(blk.b, i, h);
    const float* dO = qs.dout + r * dp;
    VF acc = hn::Zero(DF());
    std::int64_t c = 0;
    for (; c + kFloatLanes <= d; c += kFloatLanes) acc = hn::MulAdd(load(dO + c), load(o + c), acc);
    float s = hsum(acc);
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
// Only the keys the block can see are used (visible_part); the score products start at the
// whole vector before the first of them (K^T, V^T are packed for the whole tile) and the
// gradient products at that key itself, so keys before it are never read. On a tile that is
// not all visible, each query row's probabilities past the last key it may see are set to 0
// without being computed, each row group of dQ runs over its rows' keys only and each key
// row group of dK and dV over the query rows that may see it.
void backward_pair(const Geometry& G, const BackwardArgs& a, const QueryBlock& blk,
                   const QuerySide& qs, const KeyTile& tile, const KeySide& ks, Scratch& sc,
                   float* dk_tile, float* dv_tile, bool want_dq) {
  const KeyTile t = visible_part(blk, tile, a.k_pos);
  if (t.n == 0) return;  // nothing visible: no gradient
  const std::int64_t lead = t.j0 - tile.j0;                 // first visible key in the tile
  const std::int64_t aligned = lead / kTilePad * kTilePad;  // the score products start here
  const std::int64_t skip = lead - aligned;                 // masked keys before the first
  const KeyTile st = skip == 0 ? t : key_subtile(tile, aligned, lead + t.n, a.k_pos);
  const std::int64_t rows = blk.rows, np = st.np, dp = G.dp, d = G.s.head_dim;
  float* p = sized(sc.scores, rows * kKeyTile);
  float* ds = sized(sc.dscores, rows * kKeyTile);

  // The trims (relative to st's keys): row_key_end[r], the keys row r may see; query_begin[j],
  // the first row that may see key j (rows before it have row_key_end <= j).
  const bool mask = !all_visible(blk, st);
  std::int64_t* row_key_end = sized(sc.row_key_end, rows);
  std::int64_t* query_begin = sized(sc.query_begin, st.n);
  std::int64_t* mask_end = sized(sc.key_end, rows);
  std::int64_t mask_from = 0;
  if (mask) {
    for (std::int64_t r = 0; r < rows; ++r) {
      row_key_end[r] = key_end_for(st, a.k_pos, qs.qpos[r], qs.qdoc[r]);
      // Whole vectors of probabilities are computed: the mask covers them.
      mask_end[r] = std::min(st.n, (row_key_end[r] + kFloatLanes - 1) / kFloatLanes * kFloatLanes);
    }
    for (std::int64_t j = 0, r = 0, seen = 0; j < st.n; ++j) {
      while (r < rows && seen <= j) seen = std::max(seen, row_key_end[r++]);
      query_begin[j] = seen > j ? r - 1 : rows;
    }
    mask_from = keys_seen_by_all(blk, st, a.k_pos);
  }

  tile_scores(G, blk, st, qs.q, ks.kt + aligned, tile.np, qs.qpos, qs.qdoc, a.k_pos + st.j0,
              mask_from, mask_end, p);
  // dP = dO V^T
  tile_product(rows, np, d, qs.dout, dp, 1, ks.vt + aligned, tile.np, ds, np, Init::Zero);
  for (std::int64_t r = 0; r < rows; ++r) {
    const VF shift = splat(qs.lse2[r]);
    const VF delta = splat(qs.delta[r]);
    float* prow = p + r * np;
    float* dsrow = ds + r * np;
    const std::int64_t seen = mask ? mask_end[r] : np;
    std::int64_t c = 0;
    for (; c < seen; c += kFloatLanes) {
      const VF pv = exp2_approx(hn::Sub(load(prow + c), shift));
      store(prow + c, pv);
      store(dsrow + c, hn::Mul(pv, hn::Sub(load(dsrow + c), delta)));  // dS = P (dP - D)
    }
    for (; c < np; c += kFloatLanes) {
      store(prow + c, hn::Zero(DF()));
      store(dsrow + c, hn::Zero(DF()));
    }
  }
  TileTrim key_trim, query_trim;  // of dK, dV (rows: keys) and of dQ (rows: queries)
  if (mask) {
    key_trim.k_begin = query_begin + skip;
    for (std::int64_t r = 0; r < rows; ++r)
      row_key_end[r] = std::max<std::int64_t>(0, row_key_end[r] - skip);
    query_trim.k_end = row_key_end;
  }
  if (dk_tile != nullptr) {
    // dV += P^T dO ; dK += dS^T (scaled q), over the visible keys only
    tile_product_trimmed(t.n, dp, rows, p + skip, 1, np, qs.dout, dp, dv_tile + lead * dp, dp,
                         Init::Accumulate, nullptr, key_trim);
    tile_product_trimmed(t.n, dp, rows, ds + skip, 1, np, qs.q, dp, dk_tile + lead * dp, dp,
                         Init::Accumulate, nullptr, key_trim);
  }
  if (want_dq) {
    // dQ += scale dS K, through a tile so that the padding columns are not written.
    float* dq_tile = sized(sc.acc, rows * dp);
    tile_product_trimmed(rows, dp, t.n, ds + skip, np, 1, ks.krow + lead * dp, dp, dq_tile, dp,
                         Init::Zero, nullptr, query_trim);
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
    tiles[u] = key_tile(G, a.k_pos, a.docs, b, g, first_tile + u);
    std::fill(dk_tiles + u * kKeyTile * dp, dk_tiles + (u * kKeyTile + tiles[u].n) * dp, 0.0f);
    std::fill(dv_tiles + u * kKeyTile * dp, dv_tiles + (u * kKeyTile + tiles[u].n) * dp, 0.0f);
  }
  for (std::int64_t qb = 0; qb < G.q_blocks; ++qb) {
    const QueryBlock blk = query_block(G, a.q_pos, a.docs, b, g, qb);
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
  const QueryBlock blk = query_block(G, a.q_pos, a.docs, b, g, qb);
  bool packed = false;
  QuerySide qs{};
  for (std::int64_t ti = 0; ti < G.k_tiles; ++ti) {
    const KeyTile t = key_tile(G, a.k_pos, a.docs, b, g, ti);
    if (none_visible(blk, t)) continue;
    if (!packed) {
      qs = pack_query_side(G, a, blk, sc);
      packed = true;
    }
    const KeySide ks = pack_key_side(G, a, t, sc, 0, true);
    backward_pair(G, a, blk, qs, t, ks, sc, nullptr, nullptr, true);
  }
}

// The per-target entries: one unit of each parallel loop of the backward.
void BackwardKeyTiles(const Geometry& G, const BackwardArgs& a, std::int64_t b, std::int64_t g,
                      std::int64_t first_tile, bool want_dq) {
  backward_key_tiles(G, a, b, g, first_tile, want_dq);
}
void BackwardQueryBlock(const Geometry& G, const BackwardArgs& a, std::int64_t b, std::int64_t g,
                        std::int64_t qb) {
  backward_query_block(G, a, b, g, qb);
}

}  // namespace origami::kernels::attn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace attn {
HWY_EXPORT(BackwardKeyTiles);
HWY_EXPORT(BackwardQueryBlock);

// Fused mode when the (batch, kv head) units keep at least 3/4 of the threads busy.
bool use_fused_backward(std::int64_t units, int threads) {
  if (threads <= 1) return true;
  const std::int64_t rounds = (units + threads - 1) / threads;
  return 4 * units >= 3 * rounds * threads;
}
}  // namespace attn

using namespace attn;  // the private tile geometry

void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const std::int64_t* q_pos, const std::int64_t* k_pos, float scale,
                        const float* out, const float* lse, const float* dout, float* dq, float* dk,
                        float* dv) {
  attention_backward(s, q, k, v, q_pos, k_pos, AttentionDocs{}, scale, out, lse, dout, dq, dk, dv);
}

void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const std::int64_t* q_pos, const std::int64_t* k_pos,
                        const AttentionDocs& docs, float scale, const float* out,
                        const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  if (dryrun::active()) {  // 2.5x the forward's products (attention.h)
    dryrun::skip_attention_kernel(2.5 * attention_forward_flops(s, q_pos, k_pos, docs), 0.0);
    return;
  }
  check_call(s, scale,
             q != nullptr && out != nullptr && lse != nullptr && dout != nullptr && dq != nullptr,
             k != nullptr && v != nullptr && dk != nullptr && dv != nullptr,
             (q_pos != nullptr || s.q_len == 0) && (k_pos != nullptr || s.kv_len == 0));
  check_docs(s, docs);
  const Geometry G(s, kBackwardRows);
  const BackwardArgs a{q, k, v, q_pos, k_pos, scale, out, lse, dout, dq, dk, dv, docs};
  const std::int64_t units = s.batch * s.kv_heads;
  const int threads = thread_count();
  if (use_fused_backward(units, threads)) {
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (threads > 1)
    for (std::int64_t u = 0; u < units; ++u) {
      for (std::int64_t ti = 0; ti < G.k_tiles; ti += kBackwardTilesPerUnit) {
        HWY_DYNAMIC_DISPATCH(BackwardKeyTiles)(G, a, u / s.kv_heads, u % s.kv_heads, ti, true);
      }
    }
    return;
  }
  const std::int64_t per_bg = (G.k_tiles + kBackwardTilesPerUnit - 1) / kBackwardTilesPerUnit;
  const std::int64_t key_units = units * per_bg;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t u = 0; u < key_units; ++u) {
    const std::int64_t bg = u / per_bg;
    HWY_DYNAMIC_DISPATCH(BackwardKeyTiles)(G, a, bg / s.kv_heads, bg % s.kv_heads,
                                           (u % per_bg) * kBackwardTilesPerUnit, false);
  }
  const std::int64_t query_units = units * G.q_blocks;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t u = 0; u < query_units; ++u) {
    const std::int64_t qb = u % G.q_blocks, bg = u / G.q_blocks;
    HWY_DYNAMIC_DISPATCH(BackwardQueryBlock)(G, a, bg / s.kv_heads, bg % s.kv_heads, qb);
  }
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
