// Flash attention (forward, FlashAttention-2 backward, log-sum-exp merge) on explicit global
// positions with grouped-query attention. See attention.h for the contract.
// Files: attention.cpp (this overview, forward, merge, FLOP count), attention_backward.cpp,
// attention_tiles.h (query/key tiles, positions, packing), attention_simd-inl.h (exp2, the
// register-blocked tile product). The vector code is compiled for every SIMD target (Highway's
// foreach_target: this file is included once per target) and the public functions dispatch to
// the best one at run time (kernels/simd.h).
//
// Tiling. A query block is `rows` consecutive query positions times the rep = H/Hkv query
// heads that share one kv head: rows*rep "virtual rows" of d values, so every K/V tile loaded
// is used by all the heads of its group. Keys go in tiles of kKeyTile. Scores exist only as one
// tile (virtual rows x keys) per thread. They are kept in base 2: q is pre-multiplied by
// scale*log2(e), so the softmax needs exp2 only, and lse = (m + log2 l) * ln 2. Every product
// is a register-blocked micro-kernel on packed tiles (attention_simd-inl.h).
//   forward   S^T = K Q^T (keys x queries), so each query's running max and sum are vectors
//             down the columns; then O = alpha O + P V. Four query blocks share each copy of
//             a K/V tile.
//   backward  per (query block, key tile): S = Q K^T, P = exp2(S - lse), dP = dO V^T,
//             dS = P (dP - D) with D = rowsum(dO O), dV += P^T dO, dK += dS^T Q, dQ += dS K
//             (the scale and ln 2 factors folded in). Two key tiles share each packed query
//             block.
//
// Masking. Per tile pair, the min/max positions and document ids decide: no visible pair
// (keys after every query, or document ranges that do not meet) -> skipped before any
// packing; every pair visible -> no per-element check; otherwise the tile is cut to the keys
// the block can see (none after its last position or document, none before its first
// document: visible_part), and within that part each vector of queries (forward) or row
// group (backward) computes only up to the last key it may see, with an element-wise mask
// on the keys that not every query of the block sees. A query
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

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/attention_tiles.h"
#include "origami/kernels/threads.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/attention_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::attn::HWY_NAMESPACE {

// Query rows ([B, q_len, H, d]) of a block, transposed to [d, mp] and times `mult`; zero
// columns past the block's rows.
void pack_query_columns(const Geometry& G, const QueryBlock& blk, const float* src, float mult,
                        std::int64_t mp, float* dst) {
  const std::int64_t d = G.s.head_dim;
  transpose_rows(
      blk.rows, d,
      [&](std::int64_t r) {
        return src + G.q_offset(blk.b, blk.i0 + r / G.rep, blk.g * G.rep + r % G.rep);
      },
      mult, dst, mp);
  for (std::int64_t c = 0; c < d; ++c) std::fill(dst + c * mp + blk.rows, dst + (c + 1) * mp, 0.0f);
}

// Online-softmax update of one tile of transposed scores st [n keys, mp queries]: a query is a
// column, so its max and sum run down the rows and each vector holds one vector's worth of
// queries (no horizontal reductions). Scores become probabilities relative to the new running max; alpha rescales
// what was accumulated before. key_end (null: n for all): per vector of queries, the keys it
// may see; the later rows of that vector are hidden from all its queries and set to 0 without
// being read.
void online_softmax_columns(std::int64_t n, std::int64_t mp, float* st, float* col_max,
                            float* col_sum, float* alpha, const std::int64_t* key_end) {
  const DF d;
  const VF ninf = splat(kNegInf);
  for (std::int64_t c = 0; c < mp; c += kFloatLanes) {
    const std::int64_t seen = key_end == nullptr ? n : key_end[c / kFloatLanes];
    VF vm = ninf;
    for (std::int64_t j = 0; j < seen; ++j) vm = hn::Max(vm, load(st + j * mp + c));
    const VF m_old = load(col_max + c);
    const VF m_new = hn::Max(m_old, vm);
    // A query that has seen no key yet keeps m = -inf; subtracting 0 then gives exp2(-inf) = 0.
    const VF shift = hn::IfThenZeroElse(hn::Eq(m_new, ninf), m_new);
    const VF a = hn::IfThenZeroElse(hn::Eq(m_old, ninf), exp2_approx(hn::Sub(m_old, m_new)));
    VF sum = hn::Zero(d);
    for (std::int64_t j = 0; j < seen; ++j) {
      const VF p = exp2_approx(hn::Sub(load(st + j * mp + c), shift));
      store(st + j * mp + c, p);
      sum = hn::Add(sum, p);
    }
    for (std::int64_t j = seen; j < n; ++j) store(st + j * mp + c, hn::Zero(d));
    store(col_sum + c, hn::MulAdd(load(col_sum + c), a, sum));
    store(col_max + c, m_new);
    store(alpha + c, a);
  }
}

// Running state of one query block in the forward: Q^T, the output accumulator and the
// per-query max, sum and rescale factor.
struct ForwardBlock {
  QueryBlock blk;
  std::int64_t mp = 0;  // rows padded to whole vectors
  float *qt, *acc, *col_max, *col_sum, *alpha;
  std::int64_t* qpos;
  std::int32_t* qdoc;
};

// This block's share of one key tile (whose K and V rows are in krow, vrow). On a tile that
// is not all visible (a diagonal one, or one at a document boundary), each vector of queries
// only computes, masks and exponentiates the keys up to the last one it may see (key_end),
// and each row group of the P V product only runs over those keys.
void forward_block_tile(const Geometry& G, const ForwardArgs& a, ForwardBlock& f,
                        const KeyTile& tile, const float* krow, const float* vrow, float* st) {
  const std::int64_t rows = f.blk.rows, mp = f.mp, dp = G.dp;
  const KeyTile t = visible_part(f.blk, tile, a.k_pos);
  if (t.n == 0) return;  // nothing visible: the block's state stays as it is
  const float* k_rows = krow + (t.j0 - tile.j0) * dp;
  const float* v_rows = vrow + (t.j0 - tile.j0) * dp;
  const std::int64_t* kpos = a.k_pos + t.j0;
  if (all_visible(f.blk, t)) {
    tile_product(t.n, mp, G.s.head_dim, k_rows, dp, 1, f.qt, mp, st, mp, Init::Zero);
    online_softmax_columns(t.n, mp, st, f.col_max, f.col_sum, f.alpha, nullptr);
    // acc = alpha * acc + P V, with P(r, j) = st[j, r].
    tile_product(rows, dp, t.n, st, 1, mp, v_rows, dp, f.acc, dp, Init::ScaleRows, f.alpha);
    return;
  }
  Scratch& sc = scratch();
  const std::int64_t vectors = mp / kFloatLanes;
  std::int64_t* key_end = sized(sc.key_end, vectors);
  std::int64_t* row_key_end = sized(sc.row_key_end, rows);
  for (std::int64_t v = 0; v < vectors; ++v) {
    std::int64_t qmax = kPosMin;
    std::int32_t dmax = std::numeric_limits<std::int32_t>::min();
    for (std::int64_t r = v * kFloatLanes; r < std::min(rows, (v + 1) * kFloatLanes); ++r) {
      qmax = std::max(qmax, f.qpos[r]);
      dmax = std::max(dmax, f.qdoc[r]);
    }
    key_end[v] = key_end_for(t, a.k_pos, qmax, dmax);
  }
  for (std::int64_t r = 0; r < rows; ++r) row_key_end[r] = key_end[r / kFloatLanes];
  const std::int64_t mask_from = keys_seen_by_all(f.blk, t, a.k_pos);

  TileTrim score_trim;
  score_trim.rows_of_vector = key_end;
  tile_product_trimmed(t.n, mp, G.s.head_dim, k_rows, dp, 1, f.qt, mp, st, mp, Init::Zero,
                       nullptr, score_trim);
  for (std::int64_t v = 0; v < vectors; ++v) {
    const std::int64_t r_end = std::min(rows, (v + 1) * kFloatLanes);
    for (std::int64_t j = mask_from; j < key_end[v]; ++j) {
      float* row = st + j * mp;
      for (std::int64_t r = v * kFloatLanes; r < r_end; ++r)
        row[r] = masked(t, kpos, j, f.qpos[r], f.qdoc[r]) ? kNegInf : row[r];
    }
  }
  online_softmax_columns(t.n, mp, st, f.col_max, f.col_sum, f.alpha, key_end);
  TileTrim pv_trim;
  pv_trim.k_end = row_key_end;
  tile_product_trimmed(rows, dp, t.n, st, 1, mp, v_rows, dp, f.acc, dp, Init::ScaleRows, f.alpha,
                       pv_trim);
}

// Up to blocks_per_unit consecutive query blocks of one (sequence, kv head) against every
// key tile they can see. Scores are computed transposed, S^T = K (scaled Q)^T: Q^T is packed
// once per block; each K/V tile is copied contiguous once and used by all the blocks (the
// copy reads K/V from far memory: done per block, it took 19% of the forward at S = 4K).
void forward_unit(const Geometry& G, const ForwardArgs& a, std::int64_t b, std::int64_t g,
                  std::int64_t first_qb, std::int64_t blocks_per_unit) {
  Scratch& sc = scratch();
  const std::int64_t count = std::min(blocks_per_unit, G.q_blocks - first_qb);
  const std::int64_t max_rows = G.block_rows * G.rep, max_mp = round_up_pad(max_rows);
  const std::int64_t dp = G.dp, d = G.s.head_dim;
  float* qt = sized(sc.q, count * d * max_mp);
  float* acc = sized(sc.acc, count * max_rows * dp);
  float* col_max = sized(sc.row_max, count * max_mp);
  float* col_sum = sized(sc.row_sum, count * max_mp);
  float* alpha = sized(sc.alpha, count * max_mp);
  std::int64_t* qpos = sized(sc.qpos, count * max_rows);
  std::int32_t* qdoc = sized(sc.qdoc, count * max_rows);
  float* st = sized(sc.scores, kKeyTile * max_mp);
  float* krow = sized(sc.krow, kKeyTile * dp);
  float* vrow = sized(sc.vrow, kKeyTile * dp);

  ForwardBlock blocks[kForwardBlocksPerUnit];
  for (std::int64_t u = 0; u < count; ++u) {
    ForwardBlock& f = blocks[u];
    f.blk = query_block(G, a.q_pos, a.docs, b, g, first_qb + u);
    f.mp = round_up_pad(f.blk.rows);
    f.qt = qt + u * d * max_mp;
    f.acc = acc + u * max_rows * dp;
    f.col_max = col_max + u * max_mp;
    f.col_sum = col_sum + u * max_mp;
    f.alpha = alpha + u * max_mp;
    f.qpos = qpos + u * max_rows;
    f.qdoc = qdoc + u * max_rows;
    pack_query_columns(G, f.blk, a.q, a.scale * kLog2e, f.mp, f.qt);
    query_positions(G, f.blk, a.q_pos, f.qpos);
    query_documents(G, f.blk, f.qdoc);
    std::fill(f.acc, f.acc + f.blk.rows * dp, 0.0f);
    std::fill(f.col_max, f.col_max + f.mp, kNegInf);
    std::fill(f.col_sum, f.col_sum + f.mp, 0.0f);
  }

  for (std::int64_t ti = 0; ti < G.k_tiles; ++ti) {
    const KeyTile t = key_tile(G, a.k_pos, a.docs, b, g, ti);
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

// The per-target entry: one unit of the forward's parallel loop.
void ForwardUnit(const Geometry& G, const ForwardArgs& a, std::int64_t b, std::int64_t g,
                 std::int64_t first_qb, std::int64_t blocks_per_unit) {
  forward_unit(G, a, b, g, first_qb, blocks_per_unit);
}

}  // namespace origami::kernels::attn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace attn {
HWY_EXPORT(ForwardUnit);
}  // namespace attn

using namespace attn;  // the private tile geometry

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, float scale,
                       float* out, float* lse) {
  attention_forward(s, q, k, v, q_pos, k_pos, AttentionDocs{}, scale, out, lse);
}

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos,
                       const AttentionDocs& docs, float scale, float* out, float* lse) {
  if (dryrun::active()) {  // charged the products the kernel computes under the mask
    // (or, with a memory bandwidth set, reading q and the kv_len rows of K and V once)
    const double read = static_cast<double>(s.batch * s.head_dim) *
                        static_cast<double>(s.q_len * s.heads + 2 * s.kv_len * s.kv_heads);
    dryrun::skip_attention_kernel(attention_forward_flops(s, q_pos, k_pos, docs), read);
    return;
  }
  check_call(s, scale, q != nullptr && out != nullptr && lse != nullptr,
             k != nullptr && v != nullptr,
             (q_pos != nullptr || s.q_len == 0) && (k_pos != nullptr || s.kv_len == 0));
  check_docs(s, docs);
  const Geometry G(s, kForwardRows);
  const ForwardArgs a{q, k, v, q_pos, k_pos, scale, out, lse, docs};
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
    HWY_DYNAMIC_DISPATCH(ForwardUnit)(G, a, bg / s.kv_heads, bg % s.kv_heads,
                                      (u % per_bg) * per_unit, per_unit);
  }
}

void attention_merge(std::int64_t batch, std::int64_t q_len, std::int64_t heads,
                     std::int64_t head_dim, float* out_a, float* lse_a, const float* out_b,
                     const float* lse_b) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
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
  // Visible pairs: for each query, the keys at or before it. Positions span a range about as
  // long as the sequence, so a count of keys per position and its prefix sum answer every query
  // in O(1) (the dry run asks this for every attention call of a 128K-token run); a sparse
  // range falls back to binary search on the sorted keys.
  const auto [kmin, kmax] = std::minmax_element(k_pos, k_pos + s.kv_len);
  const std::int64_t lo = *kmin, span = *kmax - *kmin + 1;
  double pairs = 0.0;
  if (span <= 4 * (s.kv_len + s.q_len)) {
    std::vector<std::int64_t> at_most(static_cast<std::size_t>(span), 0);
    for (std::int64_t j = 0; j < s.kv_len; ++j) ++at_most[static_cast<std::size_t>(k_pos[j] - lo)];
    for (std::size_t p = 1; p < at_most.size(); ++p) at_most[p] += at_most[p - 1];
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      const std::int64_t q = q_pos[i] - lo;
      if (q >= 0)
        pairs += static_cast<double>(at_most[static_cast<std::size_t>(std::min(q, span - 1))]);
    }
  } else {
    std::vector<std::int64_t> keys(k_pos, k_pos + s.kv_len);
    std::sort(keys.begin(), keys.end());
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      pairs +=
          static_cast<double>(std::upper_bound(keys.begin(), keys.end(), q_pos[i]) - keys.begin());
    }
  }
  return 4.0 * static_cast<double>(s.head_dim) * static_cast<double>(s.heads) *
         static_cast<double>(s.batch) * pairs;
}

double attention_forward_flops(const AttentionShape& s, const std::int64_t* q_pos,
                               const std::int64_t* k_pos, const AttentionDocs& docs) {
  if (!docs.any()) return attention_forward_flops(s, q_pos, k_pos);
  check_shape(s);
  check_docs(s, docs);
  if (s.q_len == 0 || s.kv_len == 0) return 0.0;
  ORIGAMI_CHECK(q_pos != nullptr && k_pos != nullptr, "attention_forward_flops: null positions");
  // Per sequence: keys sorted by (document, position); each query counts the keys of its
  // document at or before it by binary search.
  double pairs = 0.0;
  std::vector<std::pair<std::int32_t, std::int64_t>> keys(static_cast<std::size_t>(s.kv_len));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t j = 0; j < s.kv_len; ++j)
      keys[static_cast<std::size_t>(j)] = {docs.k_doc[b * s.kv_len + j], k_pos[j]};
    std::sort(keys.begin(), keys.end());
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      const std::int32_t doc = docs.q_doc[b * s.q_len + i];
      const auto first = std::lower_bound(keys.begin(), keys.end(), std::pair{doc, kPosMin});
      const auto last = std::upper_bound(keys.begin(), keys.end(), std::pair{doc, q_pos[i]});
      pairs += static_cast<double>(std::max<std::ptrdiff_t>(0, last - first));
    }
  }
  return 4.0 * static_cast<double>(s.head_dim) * static_cast<double>(s.heads) * pairs;
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
