// Packed documents against one document: attention forward + backward at S = 16K (d = 64,
// H = Hkv = 4, B = 1), one row of 16 documents of S/16 tokens against one document of S. The
// masked work is 16x smaller (pairs within documents); the kernels skip the tiles that hold
// no visible pair (attention.h), so the time should follow. Prints both times (best of
// --reps), their ratio and the visible-pair ratio.
// Run: build/bench/document_attention_bench [--seq 16384] [--docs 16] [--threads 2] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "origami/kernels/attention.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"

namespace {

using origami::kernels::AttentionDocs;
using origami::kernels::AttentionShape;

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = dist(gen);
  return x;
}

struct Run {
  double seconds = 0;  // best forward + backward
  double forward_flops = 0;
};

// One row of `docs` documents of S / docs tokens (docs = 1: plain causal, no document ids).
Run time_attention(std::int64_t S, std::int64_t docs, int reps) {
  const std::int64_t H = 4, d = 64;
  const AttentionShape s{1, S, S, H, H, d};
  std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(S));
  for (std::int64_t i = 0; i < S; ++i) ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * docs / S);
  const AttentionDocs masks = docs > 1 ? AttentionDocs{ids.data(), ids.data()} : AttentionDocs{};
  const auto n = static_cast<std::size_t>(S * H * d);
  const auto q = random_vector(n, 1), k = random_vector(n, 2), v = random_vector(n, 3),
             dout = random_vector(n, 4);
  std::vector<float> out(n), lse(static_cast<std::size_t>(S * H)), dq(n), dk(n), dv(n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Run r;
  r.forward_flops = origami::kernels::attention_forward_flops(s, pos.data(), pos.data(), masks);
  r.seconds = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    std::fill(dq.begin(), dq.end(), 0.0f);
    std::fill(dk.begin(), dk.end(), 0.0f);
    std::fill(dv.begin(), dv.end(), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    origami::kernels::attention_forward(s, q.data(), k.data(), v.data(), pos.data(), pos.data(),
                                        masks, scale, out.data(), lse.data());
    origami::kernels::attention_backward(s, q.data(), k.data(), v.data(), pos.data(), pos.data(),
                                         masks, scale, out.data(), lse.data(), dout.data(),
                                         dq.data(), dk.data(), dv.data());
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.seconds = std::min(r.seconds, t);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t S = 16384, docs = 16;
  int threads = 2, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (a == "--seq") S = v;
    else if (a == "--docs") docs = v;
    else if (a == "--threads") threads = static_cast<int>(v);
    else if (a == "--reps") reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown option %s (use --seq, --docs, --threads, --reps)\n", argv[i]);
      return 2;
    }
  }
  if (S < 1 || docs < 1 || docs > S || threads < 1 || reps < 1) {
    std::fprintf(stderr, "need --seq >= --docs >= 1, --threads >= 1, --reps >= 1\n");
    return 2;
  }
  origami::kernels::set_thread_count(threads);
  std::printf("attention forward+backward, S = %lld, d = 64, H = Hkv = 4, %d threads, SIMD %s, "
              "best of %d\n",
              static_cast<long long>(S), threads, origami::kernels::simd_target().c_str(), reps);
  const Run one = time_attention(S, 1, reps);
  const Run packed = time_attention(S, docs, reps);
  std::printf("one document of %lld:        %8.3f s  (%.1f GFLOP/s)\n",
              static_cast<long long>(S), one.seconds, 3.5 * one.forward_flops / one.seconds / 1e9);
  std::printf("%lld documents of %lld:       %8.3f s  (%.1f GFLOP/s)\n",
              static_cast<long long>(docs), static_cast<long long>(S / docs), packed.seconds,
              3.5 * packed.forward_flops / packed.seconds / 1e9);
  std::printf("speed-up %.2fx (visible pairs %.2fx fewer)\n", one.seconds / packed.seconds,
              one.forward_flops / packed.forward_flops);
  return 0;
}
