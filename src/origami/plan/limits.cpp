#include "origami/plan/limits.h"

#include <algorithm>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::plan {

double approximate_job_bytes(const ModelConfig& m, const Workload& w) {
  const double h = static_cast<double>(m.hidden_size), f = static_cast<double>(m.intermediate_size),
               L = static_cast<double>(m.num_hidden_layers), V = static_cast<double>(m.vocab_size);
  const double qd = static_cast<double>(m.q_dim()), kvd = static_cast<double>(m.kv_dim());
  const double tokens = static_cast<double>(w.batch) * static_cast<double>(w.seq);
  // Parameters, gradients, moments and a master copy (8 B per element is above every
  // precision profile), and per token every layer's saved rows plus the logits, with room
  // for the planner's constant factors (16 rows of the wider of h and heads x head_dim plus
  // 4 f per layer cover q, k, v, o, the MLP's three and their gradients).
  const double params = L * (2 * h * qd + 2 * h * kvd + 3 * h * f + 2 * h) + 2 * V * h + h;
  const double per_token = L * (16 * std::max(h, qd) + 4 * f) + 2 * V;
  return 8 * (5 * params + tokens * per_token);
}

void check_countable(const ModelConfig& m, const Workload& w) {
  const double bytes = approximate_job_bytes(m, w);
  if (!(bytes <= kMaxCountedBytes))
    throw ConfigError(fmt::format(
        "--seq {} x --batch {} on this model (h {}, {} layers, vocabulary {}) needs about {:.3g} "
        "bytes, beyond 2^60 (1 EiB) that no device holds and the planner cannot count; use a "
        "shorter --seq, a smaller --batch or a smaller model",
        w.seq, w.batch, m.hidden_size, m.num_hidden_layers, m.vocab_size, bytes));
}

}  // namespace origami::plan
