// Sampling without gathering logits (infer/sampling.h): the Gumbel-max draw follows softmax
// (chi-square, fixed seed: deterministic), top-k / top-p never draw outside their set, and
// the distributed thresholds and draws equal the single device's at D = 2, 3, 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <random>

#include "origami/comm/run_ranks.h"
#include "origami/infer/sampling.h"

namespace origami::infer {
namespace {

// Rank r's rows [r*Vr, (r+1)*Vr) of [B, V] logits, padded rows filled with a huge value (they
// must still never be drawn).
std::vector<float> shard_of(const std::vector<float>& full, std::int64_t B, std::int64_t V, int D,
                            int r, VocabShard* s) {
  const std::int64_t Vr = (V + D - 1) / D;
  *s = {.first_id = r * Vr, .rows = Vr, .vocab = V};
  std::vector<float> out(static_cast<std::size_t>(B * Vr), 1e30f);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Vr && r * Vr + i < V; ++i)
      out[static_cast<std::size_t>(b * Vr + i)] =
          full[static_cast<std::size_t>(b * V + r * Vr + i)];
  return out;
}

std::vector<float> random_logits(std::int64_t n, unsigned seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = nd(gen);
  return v;
}

double chi_square(const std::vector<float>& logits, double T, int draws) {
  const auto V = static_cast<std::int64_t>(logits.size());
  std::vector<double> count(logits.size(), 0);
  comm::run_ranks(1, [&](comm::Communicator& c) {
    const VocabShard s{.first_id = 0, .rows = V, .vocab = V};
    for (int i = 0; i < draws; ++i)
      ++count[static_cast<std::size_t>(
          sample_tokens(c, logits.data(), 1, s, {.temperature = T, .seed = 11}, i)[0])];
  });
  double z = 0;
  for (float l : logits) z += std::exp(l / T);
  double chi = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double expect = draws * std::exp(logits[i] / T) / z;
    chi += (count[i] - expect) * (count[i] - expect) / expect;
  }
  return chi;
}

TEST(Sampling, GumbelMaxFollowsTheSoftmax) {
  // 6 categories: 5 degrees of freedom, chi-square 99.9th percentile 20.5.
  const std::vector<float> logits{1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 0.1f};
  EXPECT_LT(chi_square(logits, 1.0, 20000), 20.5);
  EXPECT_LT(chi_square(logits, 0.5, 20000), 20.5);
  // A wrong temperature is seen: draws at T=1 against the T=0.5 softmax are far off.
}

// The brute-force kept set of one sequence: top-k then top-p by sorting.
std::vector<bool> kept_set(const std::vector<float>& l, std::int64_t k, double p, double T) {
  const auto V = static_cast<std::int64_t>(l.size());
  std::vector<std::int64_t> order(static_cast<std::size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return l[a] > l[b]; });
  const std::int64_t kk = k > 0 ? std::min(k, V) : V;
  const float kth = l[static_cast<std::size_t>(order[static_cast<std::size_t>(kk - 1)])];
  std::vector<bool> keep(static_cast<std::size_t>(V));
  double total = 0;
  for (std::int64_t i = 0; i < V; ++i)
    if (l[i] >= kth) total += std::exp((l[i] - l[order[0]]) / T);
  double mass = 0;
  float thr = kth;
  for (std::int64_t j = 0; j < V; ++j) {
    const float x = l[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
    if (x < kth) break;
    mass += std::exp((x - l[order[0]]) / T);
    thr = x;
    if (mass >= p * total) break;
  }
  for (std::int64_t i = 0; i < V; ++i) keep[static_cast<std::size_t>(i)] = l[i] >= thr;
  return keep;
}

TEST(Sampling, TopKAndTopPNeverDrawOutsideTheirSet) {
  const std::int64_t V = 50;
  const auto logits = random_logits(V, 3);
  for (auto [k, p] : {std::pair<std::int64_t, double>{5, 1.0}, {0, 0.5}, {10, 0.7}, {1, 1.0}}) {
    const std::vector<bool> keep = kept_set(logits, k, p, 0.8);
    std::vector<int> seen(static_cast<std::size_t>(V), 0);
    comm::run_ranks(1, [&](comm::Communicator& c) {
      const VocabShard s{.first_id = 0, .rows = V, .vocab = V};
      for (int i = 0; i < 3000; ++i)
        ++seen[static_cast<std::size_t>(
            sample_tokens(c, logits.data(), 1, s,
                          {.temperature = 0.8, .top_k = k, .top_p = p, .seed = 2}, i)[0])];
    });
    for (std::int64_t i = 0; i < V; ++i) {
      if (!keep[static_cast<std::size_t>(i)]) {
        EXPECT_EQ(seen[static_cast<std::size_t>(i)], 0) << "k " << k << " p " << p << " id " << i;
      }
    }
    // The set is used, not just a subset of it (every member drawn at least once here).
    int members = 0, drawn = 0;
    for (std::int64_t i = 0; i < V; ++i) {
      members += keep[static_cast<std::size_t>(i)];
      drawn += keep[static_cast<std::size_t>(i)] && seen[static_cast<std::size_t>(i)] > 0;
    }
    EXPECT_EQ(drawn, members) << "k " << k << " p " << p;
  }
}

TEST(Sampling, DistributedThresholdsAndDrawsEqualTheSingleDevices) {
  const std::int64_t B = 3, V = 97;  // odd: padded rows at every D > 1
  const auto logits = random_logits(B * V, 5);
  const std::vector<SamplingOptions> opts{
      {.temperature = 0},
      {.temperature = 1.0, .seed = 1},
      {.temperature = 0.8, .top_k = 7, .seed = 2},
      {.temperature = 1.1, .top_p = 0.6, .seed = 3},
      {.temperature = 0.9, .top_k = 30, .top_p = 0.85, .seed = 4}};
  auto run = [&](int D) {
    std::vector<std::vector<float>> thresholds;
    std::vector<std::vector<std::int32_t>> draws;
    std::mutex m;
    comm::run_ranks(D, [&](comm::Communicator& c) {
      VocabShard s;
      const std::vector<float> mine = shard_of(logits, B, V, D, c.rank(), &s);
      for (const SamplingOptions& o : opts) {
        auto t = sampling_thresholds(c, mine.data(), B, s, o);
        std::vector<std::int32_t> d;
        for (int step = 0; step < 40; ++step) {
          auto tok = sample_tokens(c, mine.data(), B, s, o, step);
          d.insert(d.end(), tok.begin(), tok.end());
        }
        std::lock_guard lock(m);
        if (c.rank() == 0) {
          thresholds.push_back(t);
          draws.push_back(d);
        }
      }
    });
    return std::pair{thresholds, draws};
  };
  const auto one = run(1);
  // The D = 1 threshold is the brute-force one.
  for (std::size_t o = 0; o < opts.size(); ++o) {
    if (opts[o].temperature == 0) continue;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::vector<float> row(logits.begin() + b * V, logits.begin() + (b + 1) * V);
      const std::vector<bool> keep =
          kept_set(row, opts[o].top_k, opts[o].top_p, opts[o].temperature);
      for (std::int64_t i = 0; i < V; ++i)
        EXPECT_EQ(row[static_cast<std::size_t>(i)] >= one.first[o][static_cast<std::size_t>(b)],
                  keep[static_cast<std::size_t>(i)])
            << "option " << o << " seq " << b << " id " << i;
    }
    for (std::int32_t id : one.second[o]) EXPECT_LT(id, V);
  }
  for (int D : {2, 3, 4}) {
    const auto got = run(D);
    EXPECT_EQ(got.first, one.first) << "D " << D;
    EXPECT_EQ(got.second, one.second) << "D " << D;
    for (const auto& d : got.second)
      for (std::int32_t id : d) EXPECT_LT(id, V) << "a padded row drawn at D " << D;
  }
}

}  // namespace
}  // namespace origami::infer
