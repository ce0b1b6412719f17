// Inference rows (DESIGN.md §6), UNCHECKED until the inference engine lands: prefill of a long
// prompt with the TSP forward, each rank keeping its head group's K/V (a head-sharded cache);
// decode weight-stationary on the resident shards (tensor parallel): two all-reduces of h per
// layer per token, plus the embedding's and the sampling's (max, index) all-reduce.
#pragma once

#include <cstdint>

#include "origami/model/config.h"
#include "origami/plan/cost_model.h"
#include "origami/plan/hardware.h"

namespace origami::plan {

struct InferenceRow {
  int degree = 1;  // TSP degree = ranks holding one model replica
  std::int64_t parameters = 0, kv_cache = 0, comm_buffers = 0, workspace = 0, logits = 0,
               overhead = 0;
  std::int64_t total() const {
    return parameters + kv_cache + comm_buffers + workspace + logits + overhead;
  }
  bool fits = false;
  double prefill_s = 0;            // the prompt's forward
  std::int64_t prefill_bytes = 0;  // sent per rank during prefill
  double decode_token_s = 0;       // one decode step of the whole batch
  std::int64_t decode_bytes = 0;   // sent per rank per decode step
  double decode_tokens_per_s = 0;  // batch / decode_token_s, one replica
};

// Prompt of `w.seq` tokens for `w.batch` sequences on `degree` ranks (TSP prefill, then
// decode with the cache of w.seq tokens). Throws ConfigError for degrees the model refuses.
InferenceRow predict_inference(const ModelConfig& m, int degree, const Workload& w,
                               const Hardware& hw);

}  // namespace origami::plan
