// Sampling the next token from logits sharded by vocabulary rows, without gathering them
// (docs/design.md §6). Rank r holds the logits of ids [first_id, first_id + rows); ids >= vocab are
// padding and never drawn. Every step is a function of the logits and (seed, step, sequence,
// global id) only, so a rank layout draws exactly the token one device draws:
//   greedy       temperature 0: arg-max of the logits (ties: the smaller id), one all-reduce
//                of (value, index) pairs (Communicator::all_reduce_maxloc).
//   temperature  Gumbel-max: arg-max of l/T + g, g = -log(-log u), u = Philox uniform keyed by
//                (seed, "gumbel/<step>/<sequence>", global id): an exact draw from softmax(l/T).
//   top-k        each rank's k largest logits -> all-gather of D*k values -> the k-th largest
//                is the threshold; tokens with l >= threshold are kept (ties at the threshold
//                are all kept), the rest get -inf before the Gumbel-max.
//   top-p        among the kept tokens, the smallest set of highest logits whose probability
//                mass under softmax(l/T) is >= p (ties at the threshold kept). Exact and
//                order-free: each token's weight exp((l - max)/T) is rounded to an integer
//                multiple of 2^-40 (int64), so masses add exactly in any order; the threshold
//                logit is found by bisection over the 2^32 float keys (32 all-reduces of one
//                int64 per sequence) and is therefore the same at any D.
// All sequences of the batch share each collective (one call per round, B values).
#pragma once

#include <cstdint>
#include <vector>

#include "origami/comm/communicator.h"

namespace origami::infer {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy
  std::int64_t top_k = 0;  // 0: off
  double top_p = 1.0;      // 1: off
  std::uint64_t seed = 0;
};
// ConfigError naming the flag unless temperature >= 0, top_k >= 0 and 0 < top_p <= 1.
void validate(const SamplingOptions& options);

struct VocabShard {
  std::int64_t first_id = 0;  // global id of the first local row
  std::int64_t rows = 0;      // local rows (Vp / D)
  std::int64_t vocab = 0;     // V: ids >= V are padding
};

// Collective over `axis` (every rank holds its shard of the same B sequences' logits,
// [B, rows] row-major). Returns the drawn id of each sequence (the same on every rank).
std::vector<std::int32_t> sample_tokens(comm::Communicator& axis, const float* logits,
                                        std::int64_t batch, const VocabShard& shard,
                                        const SamplingOptions& options, std::int64_t step);

// The kept set's threshold (for tests): tokens with logit >= the returned value are kept by
// top-k and top-p (-inf: all). Collective, as sample_tokens.
std::vector<float> sampling_thresholds(comm::Communicator& axis, const float* logits,
                                       std::int64_t batch, const VocabShard& shard,
                                       const SamplingOptions& options);

// The Gumbel noise of (seed, step, sequence, global id).
double gumbel_noise(std::uint64_t seed, std::int64_t step, std::int64_t sequence, std::int64_t id);

}  // namespace origami::infer
