// Inference on one axis of D ranks holding the TSP shards (docs/design.md §6; docs/inference.md).
// D = 1 is the single device, running the same code.
//
// clang-format off
//  phase    per rank                                                 communication (per rank)
//  prefill  the TSP forward (tsp_ops.h) over the prompts padded to S  the TSP forward's; plus B
//           (a length the layout splits); at head-group step j rank   broadcasts of h floats
//           j keeps the gathered K/V of group j for the whole prompt  (each prompt's last hidden
//           as its KV cache; the last token's hidden row is broadcast row from its holder)
//           by its holder; logits of the owned vocabulary rows
//  decode   weight-stationary tensor parallel on the resident shards: all-reduces of B*h floats:
//           embedding rows of the owned vocabulary slice (zeros else); 1 (embedding) + 2 per
//           Q/K/V of the owned head group, appended to the local cache, layer (attention W_O,
//           attention on global positions, W_O columns; MLP on the owned  MLP W_down); no weight
//           F slice; LM head on the owned vocabulary rows                ever moves
// clang-format on
//
// Sequences of different lengths share a batch: prompt b keeps its own length (padded
// positions are never attended by real tokens: causality in prefill, the cache's positions in
// decode, see kv_cache.h), and decode appends each sequence's token at its own position.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/infer/kv_cache.h"
#include "origami/infer/sampling.h"
#include "origami/model/blocks.h"
#include "origami/parallel/inference_degree.h"
#include "origami/parallel/layout.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/shard_spec.h"

namespace origami::infer {

// The degrees the engine serves (parallel/inference_degree.h, shared with the planner).
using parallel::check_inference_degree;

class InferenceEngine {
 public:
  // Collective over `world` (its D ranks form the axis). Allocates this rank's shards
  // (MemCategory::Parameters, zeroed): initialize() them or load a checkpoint into params()
  // (ckpt::load with specs()). ConfigError if D does not divide the heads or the MLP width, or
  // neither divides the kv heads nor is a multiple of them (the TSP constraints; above the kv
  // heads each rank holds and caches its head group's one kv head, replicated over D / Hkv).
  InferenceEngine(const ModelConfig& config, comm::Communicator world, MemoryTracker& tracker,
                  parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag);
  ~InferenceEngine();

  const ModelConfig& config() const { return config_; }
  comm::Communicator& axis() { return axis_; }
  ModelTensors& params() { return params_; }
  const std::vector<parallel::ShardSpec>& specs() const { return specs_; }
  // The single-device initialisation's slices (initialize_sharded).
  void initialize(std::uint64_t seed);
  // --precision bf16, after the weights are loaded or initialised: narrows every matrix shard
  // to bf16 (model/weights_bf16.h; norms stay fp32) and keeps later prefills' KV caches in
  // bf16. Prefill widens the shards where the TSP forward packs them (fp32 messages and GEMMs);
  // decode reads the bf16 weights and cache directly (kernels/gemv.h, decode_attention.h),
  // accumulating in fp32; logits, softmax statistics and sampling stay fp32.
  void use_bf16();
  bool bf16() const { return bf16_; }

  // Collective. Prefills B prompts (ids in [0, V), 1 <= length, length + max_new_tokens <=
  // max_position_embeddings; ConfigError otherwise) and returns this rank's logits of each
  // prompt's last token, [B, vocab().rows] (MemCategory::Logits, valid until the next call).
  const Tensor& prefill(const std::vector<std::vector<std::int32_t>>& prompts,
                        std::int64_t max_new_tokens);
  // Collective. Appends tokens[b] to sequence b at position length(b) and returns the logits
  // of the next token, as prefill.
  const Tensor& decode(const std::vector<std::int32_t>& tokens);

  std::int64_t batch() const { return static_cast<std::int64_t>(lengths_.size()); }
  std::int64_t length(std::int64_t seq) const { return lengths_[static_cast<std::size_t>(seq)]; }
  VocabShard vocab() const;
  // The prompts' padded length S of the last prefill.
  std::int64_t prefill_length() const { return prefill_len_; }
  const KvCache* cache() const { return cache_.get(); }
  // Bytes of this rank's weights one decode step reads: every shard once (whatever the batch),
  // of the embedding the batch's B rows (at most: a rank reads those in its vocabulary slice).
  // The achieved bandwidth is this, summed over the ranks, over a step's time.
  std::int64_t step_weight_bytes();

 private:
  std::int64_t padded_length(std::int64_t longest) const;
  // logits_ = final norm (into n, rstd: rows x h, rows), owned vocabulary rows
  void head(const float* x, std::int64_t rows, float* n, float* rstd);
  void allocate_step_buffers();  // step_, for batch(), at the first decode

  // The decode step's buffers, sized for the batch at its first step and dropped by the next
  // prefill, so that the steps after it allocate nothing (categories as the planner counts
  // them: the MLP's gate and up rows are Activations, the rest Workspace).
  struct StepBuffers {
    Tensor x, n, rstd, y, q, k, v, out, gate, up;
    std::vector<std::int64_t> visible;  // cache slots each sequence's query searches
  };

  ModelConfig config_;
  MemoryTracker& tracker_;
  parallel::TokenLayoutKind layout_kind_;
  std::unique_ptr<parallel::ParallelGroups> groups_;
  comm::Communicator axis_;
  int D_, rank_;
  std::vector<parallel::ShardSpec> specs_;
  ModelTensors params_, no_grads_;
  RopeTables rope_;
  std::int64_t vocab_rows_;
  std::unique_ptr<KvCache> cache_;
  std::vector<std::int64_t> lengths_;
  std::int64_t prefill_len_ = 0;
  bool bf16_ = false;
  Tensor logits_;
  StepBuffers step_;
};

}  // namespace origami::infer
