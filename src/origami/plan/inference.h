// Inference rows (docs/design.md §6; docs/inference.md): prefill of B prompts of S tokens with the
// TSP forward, each rank keeping its head group's K/V (a head-sharded cache; above the kv heads
// each replica's copy of its one kv head's, as the engine keeps it); decode
// weight-stationary on the resident shards (tensor parallel): 1 + 2L all-reduces of [B, h]
// per step (embedding; per layer W_O and W_down) and the sampling's (max, index) all-reduce.
// Derived from infer/engine.cpp and checked against it by tests/infer/plan_check_test.cpp:
// every category's per-rank peak of each phase, and the bytes each operation sends per rank;
// the times against the inference dry run's virtual clock (dryrun/inference.h) by
// tests/infer/planner_inference_vs_dry_run_test.cpp.
#pragma once

#include <cstdint>

#include "origami/model/config.h"
#include "origami/plan/cost_model.h"
#include "origami/plan/hardware.h"

namespace origami::plan {

// Per-rank peak bytes of each tracker category over one phase (parameters and the RoPE tables
// included: they are resident in every phase).
struct InferenceMemory {
  std::int64_t parameters = 0, kv_cache = 0, comm_buffers = 0, workspace = 0, activations = 0,
               logits = 0;
  std::int64_t total() const {
    return parameters + kv_cache + comm_buffers + workspace + activations + logits;
  }
};

// Bytes sent per rank, by operation.
struct InferenceTraffic {
  // Prefill, on the axis: the K/V all-gathers (2 per head group per layer).
  std::int64_t prefill_kv_gathers = 0;
  // Prefill, on TspOps' own communicators: the attention shards' broadcasts and the MLP
  // shards' ring hops (the TSP forward's weight traffic).
  std::int64_t prefill_weights = 0;
  // Prefill: the B broadcasts of each prompt's last hidden row, sent by all ranks together
  // (each rank's share depends on which rank holds the row).
  std::int64_t prefill_last_rows_all_ranks = 0;
  // The embedding's 3 all-to-alls move the looked-up rows: data dependent, not predicted.
  std::int64_t decode_all_reduce = 0;  // 1 + 2L ring all-reduces of [B, h]
  std::int64_t decode_argmax = 0;      // one all-reduce of B (max, index) pairs (sampling)
};

struct InferenceRow {
  int degree = 1;  // TSP degree = ranks holding one model replica
  InferenceMemory prefill, decode;
  // Each category's peak over both phases (what the summary prints).
  std::int64_t parameters = 0, kv_cache = 0, comm_buffers = 0, workspace = 0, activations = 0,
               logits = 0, overhead = 0;
  std::int64_t total() const {
    return parameters + kv_cache + comm_buffers + workspace + activations + logits + overhead;
  }
  bool fits = false;
  InferenceTraffic traffic;
  double prefill_s = 0;            // the prompt's forward: compute + exposed communication
  double prefill_compute_s = 0, prefill_exposed_s = 0;
  std::int64_t prefill_bytes = 0;  // sent per rank during prefill (all-to-alls excluded)
  double decode_token_s = 0;       // one decode step of the whole batch (its sampling included)
  double decode_compute_s = 0, decode_comm_s = 0;
  std::int64_t decode_bytes = 0;   // sent per rank per decode step
  double decode_tokens_per_s = 0;  // batch / decode_token_s, one replica
};

// B = w.batch prompts of S = w.seq tokens (S as the engine pads it: a multiple of 2·degree,
// or of degree with w.contiguous) on `degree` ranks (TSP prefill), then decode with a cache of
// S + new_tokens positions. Throws ConfigError for degrees the model refuses.
InferenceRow predict_inference(const ModelConfig& m, int degree, const Workload& w,
                               const Hardware& hw, std::int64_t new_tokens = 0);

}  // namespace origami::plan
