// Cross-entropy over a vocabulary that may arrive in column blocks (a sharded or ringed LM
// head), with an ignore label. Full-vocabulary use is the one-block case.
#pragma once

#include <cstdint>

namespace origami::kernels {

inline constexpr std::int32_t kIgnoreLabel = -100;

// Online log-sum-exp state per token, updated one column block at a time.
//   logits: [tokens, cols], the columns [col0, col0 + cols) of the vocabulary; only global
//           columns < valid_vocab exist (the rest is padding and is ignored).
//   run_max, run_sum: per token; start at -inf and 0. After the last block the token's
//           lse = run_max + log(run_sum).
//   target_logit: per token; set when the token's target falls in this block.
void softmax_stats_update(std::int64_t tokens, std::int64_t cols, const float* logits,
                          std::int64_t col0, std::int64_t valid_vocab,
                          const std::int32_t* targets, float* run_max, float* run_sum,
                          float* target_logit);

// Combines two partial states (over disjoint column sets) into the first.
void softmax_stats_merge(std::int64_t tokens, float* max_a, float* sum_a, const float* max_b,
                         const float* sum_b);

struct LossSum {
  double sum = 0;          // sum over unmasked tokens of (lse - target logit)
  std::int64_t count = 0;  // unmasked tokens
};
// Finishes: lse[t] = run_max + log(run_sum); the loss sum and count over unmasked tokens.
LossSum softmax_stats_finish(std::int64_t tokens, const float* run_max, const float* run_sum,
                             const float* target_logit, const std::int32_t* targets, float* lse);

// Whole-vocabulary convenience: logits [tokens, V] -> lse [tokens] and the loss sum/count.
LossSum cross_entropy_forward(std::int64_t tokens, std::int64_t vocab, const float* logits,
                              const std::int32_t* targets, float* lse);

// dlogits for one column block: scale * (softmax - onehot(target)) for unmasked tokens, 0 for
// masked tokens and padding columns. OVERWRITES dlogits (the exception to the accumulate
// rule), and dlogits may alias logits (in place, so the logits buffer is reused).
// scale is usually 1 / (unmasked tokens of the whole batch); 0 tokens -> pass 0.
void cross_entropy_backward(std::int64_t tokens, std::int64_t cols, const float* logits,
                            std::int64_t col0, std::int64_t valid_vocab,
                            const std::int32_t* targets, const float* lse, float scale,
                            float* dlogits);

}  // namespace origami::kernels
