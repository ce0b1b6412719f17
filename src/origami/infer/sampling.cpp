#include "origami/infer/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/core/rng.h"

namespace origami::infer {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr float kNegInfF = -std::numeric_limits<float>::infinity();

// Order-preserving map of a float to 32 bits (a < b  <=>  key(a) < key(b)).
std::uint32_t order_key(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
}
float from_order_key(std::uint32_t k) {
  const std::uint32_t u = (k & 0x80000000u) != 0 ? k & 0x7fffffffu : ~k;
  return std::bit_cast<float>(u);
}

// Valid local rows: global id < vocab.
std::int64_t valid_rows(const VocabShard& s) {
  return std::clamp<std::int64_t>(s.vocab - s.first_id, 0, s.rows);
}

// Top-k threshold of each sequence: the k-th largest valid logit over all ranks.
std::vector<float> top_k_thresholds(comm::Communicator& axis, const float* logits,
                                    std::int64_t batch, const VocabShard& s, std::int64_t k) {
  std::vector<float> out(static_cast<std::size_t>(batch), kNegInfF);
  if (k <= 0) return out;
  const std::int64_t n = valid_rows(s);
  std::vector<float> mine(static_cast<std::size_t>(batch * k), kNegInfF);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<float> row(logits + b * s.rows, logits + b * s.rows + n);
    const std::int64_t m = std::min(k, n);
    std::partial_sort(row.begin(), row.begin() + m, row.end(), std::greater<>());
    std::copy(row.begin(), row.begin() + m, mine.begin() + b * k);
  }
  const int D = axis.size();
  std::vector<float> all(static_cast<std::size_t>(D * batch * k));
  axis.all_gather(mine, all);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<float> cand;
    for (int r = 0; r < D; ++r)
      cand.insert(cand.end(), all.begin() + (r * batch + b) * k,
                  all.begin() + (r * batch + b + 1) * k);
    std::nth_element(cand.begin(), cand.begin() + (k - 1), cand.end(), std::greater<>());
    out[static_cast<std::size_t>(b)] = cand[static_cast<std::size_t>(k - 1)];
  }
  return out;
}

// Top-p thresholds among the tokens at or above `floor` (top-k's), by bisection on the key.
std::vector<float> top_p_thresholds(comm::Communicator& axis, const float* logits,
                                    std::int64_t batch, const VocabShard& s, double p, double T,
                                    const std::vector<float>& floor) {
  const std::int64_t n = valid_rows(s);
  const auto B = static_cast<std::size_t>(batch);
  std::vector<float> mx(B, kNegInfF);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < n; ++i) mx[b] = std::max(mx[b], logits[b * s.rows + i]);
  axis.all_reduce(mx, mx, comm::ReduceOp::Max);
  // Integer weights: exact sums in any order.
  std::vector<std::vector<std::int64_t>> w(B);
  std::vector<std::int64_t> total(B, 0);
  for (std::int64_t b = 0; b < batch; ++b) {
    w[b].assign(static_cast<std::size_t>(n), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      const float l = logits[b * s.rows + i];
      if (l < floor[b]) continue;
      const double e = std::exp((static_cast<double>(l) - static_cast<double>(mx[b])) / T);
      w[b][static_cast<std::size_t>(i)] = std::llround(std::ldexp(e, 40));
      total[b] += w[b][static_cast<std::size_t>(i)];
    }
  }
  axis.all_reduce(total, total);
  // Largest key K with mass(key >= K) >= p * total: lo always satisfies it, hi never.
  std::vector<std::uint64_t> lo(B, 0), hi(B, std::uint64_t{1} << 32);
  for (int round = 0; round < 32; ++round) {
    std::vector<std::int64_t> mass(B, 0);
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::uint64_t mid = (lo[b] + hi[b]) / 2;
      for (std::int64_t i = 0; i < n; ++i)
        if (order_key(logits[b * s.rows + i]) >= mid) mass[b] += w[b][static_cast<std::size_t>(i)];
    }
    axis.all_reduce(mass, mass);
    for (std::size_t b = 0; b < B; ++b) {
      const std::uint64_t mid = (lo[b] + hi[b]) / 2;
      if (static_cast<double>(mass[b]) >= p * static_cast<double>(total[b]))
        lo[b] = mid;
      else
        hi[b] = mid;
    }
  }
  std::vector<float> out(B);
  for (std::size_t b = 0; b < B; ++b) out[b] = from_order_key(static_cast<std::uint32_t>(lo[b]));
  return out;
}

}  // namespace

void validate(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw ConfigError(fmt::format("--temperature {} must be >= 0 (0: greedy)", o.temperature));
  if (o.top_k < 0) throw ConfigError(fmt::format("--top-k {} must be >= 0 (0: off)", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw ConfigError(fmt::format("--top-p {} must be in (0, 1] (1: off)", o.top_p));
}

double gumbel_noise(std::uint64_t seed, std::int64_t step, std::int64_t sequence, std::int64_t id) {
  const rng::Key key = rng::make_key(seed, fmt::format("gumbel/{}/{}", step, sequence));
  const double u = rng::uniform(key, static_cast<std::uint64_t>(id));
  return -std::log(-std::log(u));
}

std::vector<float> sampling_thresholds(comm::Communicator& axis, const float* logits,
                                       std::int64_t batch, const VocabShard& s,
                                       const SamplingOptions& o) {
  validate(o);
  std::vector<float> t = top_k_thresholds(axis, logits, batch, s, o.top_k);
  if (o.top_p < 1 && o.temperature > 0) {
    const std::vector<float> tp =
        top_p_thresholds(axis, logits, batch, s, o.top_p, o.temperature, t);
    for (std::size_t b = 0; b < t.size(); ++b) t[b] = std::max(t[b], tp[b]);
  }
  return t;
}

std::vector<std::int32_t> sample_tokens(comm::Communicator& axis, const float* logits,
                                        std::int64_t batch, const VocabShard& s,
                                        const SamplingOptions& o, std::int64_t step) {
  validate(o);
  const bool greedy = o.temperature == 0;
  // The dry run's logits are unbacked (null): every rank offers (-inf, its first id), so the
  // arg-max's tie rule draws id 0 for every sequence -- the same collective, no data read.
  const bool unbacked = logits == nullptr && batch * s.rows > 0;
  if (unbacked && !(greedy && dryrun::active()))
    throw ConfigError("sampling on unbacked logits: only greedy decoding runs in a dry run");
  const std::vector<float> floor =
      greedy ? std::vector<float>(static_cast<std::size_t>(batch), kNegInfF)
             : sampling_thresholds(axis, logits, batch, s, o);
  const std::int64_t n = unbacked ? 0 : valid_rows(s);
  std::vector<double> best(static_cast<std::size_t>(batch), kNegInf);
  std::vector<std::int64_t> index(static_cast<std::size_t>(batch), s.first_id);
  for (std::int64_t b = 0; b < batch; ++b) {
    auto& v = best[static_cast<std::size_t>(b)];
    auto& at = index[static_cast<std::size_t>(b)];
    for (std::int64_t i = 0; i < n; ++i) {
      const float l = logits[b * s.rows + i];
      if (l < floor[static_cast<std::size_t>(b)]) continue;
      const std::int64_t id = s.first_id + i;
      const double score =
          greedy ? static_cast<double>(l)
                 : static_cast<double>(l) / o.temperature + gumbel_noise(o.seed, step, b, id);
      if (score > v) {  // strict: the smaller id wins a tie, as in all_reduce_maxloc
        v = score;
        at = id;
      }
    }
  }
  if (axis.size() > 1)
    axis.all_reduce_maxloc(comm::Buffer(best.data(), batch, DType::F64),
                           comm::Buffer(index.data(), batch, DType::I64));
  std::vector<std::int32_t> out;
  for (std::int64_t id : index) out.push_back(static_cast<std::int32_t>(id));
  return out;
}

}  // namespace origami::infer
