// TSP (DESIGN.md §3-5): folded tensor and sequence parallelism on ONE axis of D ranks. Rank r
// holds 1/D of every weight (the same blocks a tensor-parallel rank r would hold) AND 1/D of
// the tokens (the sequence layout of rank r, zigzag or contiguous). Blocks reach the weights
// they do not hold by moving the weights, never the activations of other ranks' tokens
// (except K/V inside attention). Per rank, R = B*S/D token rows, H/D heads, Kv/D kv heads,
// f/D MLP columns, Vp/D vocabulary rows (Vp: V padded up to a multiple of D).
//
// clang-format off
//  block       shard held            forward                              backward
//  embedding   rows [r*Vp/D, ..)     all-to-all of ids to the row owners, all-to-all of the row gradients to
//              of the table          all-to-all of the rows back          the owners (ids kept from forward)
//  attention   packed P_r = W_Q,W_K, for j = 0..D-1: P_j broadcast by     P_j re-broadcast (prefetched), K/V
//              W_V rows + W_O cols   j (next one prefetched on a second   re-gathered (not saved), dK/dV
//              of head group r       communicator); local Q/K/V; K/V      reduce-scattered to the owners; the
//                                    all-gather in rank order; flash      packed gradient of P_j reduced to j
//                                    attention; y += out W_O,j
//  MLP         packed M_r = gate,up  ring: D steps, the shard moves       ring with [M_s | dM_s] together: the
//              rows + down cols      rank -> rank-1 (isend/irecv posted   accumulator travels with its weights
//                                    before the GEMMs, waited after)      and reaches its owner after D hops
//  LM head     rows [r*Vp/D, ..)     vocab ring: running max / sum-exp /  ring again: logits block recomputed,
//                                    target logit (logits: R x Vp/D)      dW travels with its shard (D hops)
//  RMSNorm     replicated            -                                    gradients summed over the axis
// clang-format on
//
// Reduction groups: loss sum and count over tsp x dp (each rank holds distinct tokens); weight
// shards' gradients are complete on their owner after the blocks (then summed over dp);
// RMSNorm gradients summed over tsp x dp; gradient norm: shards' squares summed over tsp,
// norms counted once. The tsp axis is the plan's sequence axis ("sp" in ParallelGroups).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "origami/parallel/attention_cp.h"
#include "origami/parallel/plan.h"
#include "origami/parallel/strategy_ops.h"

namespace origami::parallel {

class TspOps final : public StrategyOps {
 public:
  TspOps(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
         ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker);

  void set_batch(const LocalBatch* batch) override;

  std::int64_t stream_rows() const override;
  void embed_forward(float* x) override;
  void embed_backward(const float* dx) override;
  void attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x) override;
  void attention_backward(std::int64_t l, const float* n, const AttentionSaved& s, const float* dx,
                          float* dn) override;
  void mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) override;
  void mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                    float* dn) override;
  kernels::LossSum head_forward(const float* nf, bool with_backward) override;
  void head_backward(float grad_scale, float* dnf) override;

  // The duplicate of the axis carrying the shard broadcasts and ring hops (its stats are the
  // weight traffic; the axis' own are K/V, dK/dV, gradient reductions and the embedding's).
  comm::Communicator& shard_comm() { return bcast_; }

  // Inference (prefill, infer/engine.h): when set, at head-group step j == this rank the
  // attention forward of layer l copies the gathered K/V of its own head group to keep(l)
  // (SequenceAxis::keep_k / keep_v): the KV cache sharded by head group, no extra traffic.
  using KvKeep = std::function<std::pair<float*, float*>(std::int64_t layer)>;
  void set_kv_keep(KvKeep keep) { kv_keep_ = std::move(keep); }

 private:
  std::int64_t rows() const;
  AttentionDims attention_dims() const;
  std::int64_t attention_floats() const;  // packed P_j: W_Q, W_K, W_V rows, W_O columns
  std::int64_t mlp_floats() const;        // packed M_j: gate, up rows, down columns
  // The owner packs its shard into buf; every rank then receives it (async, on bcast_).
  comm::Handle broadcast_attention_shard(std::int64_t l, int owner, Tensor& buf);
  // One ring hop of `count` floats: send `cur` to rank-1, receive the next into `next`.
  struct Hop {
    comm::Handle send, recv;
    void wait() {
      send.wait();
      recv.wait();
    }
  };
  Hop ring_hop(const float* cur, float* next, std::int64_t count, int tag);

  const ModelConfig& config_;
  ParallelGroups& groups_;
  const TokenLayout& layout_;
  ModelTensors& params_;
  ModelTensors& grads_;
  MemoryTracker& tracker_;
  RopeTables rope_;
  std::vector<std::int64_t> kv_positions_;  // every rank's positions, rank order
  int size_, rank_;
  comm::Communicator& axis_;  // the tsp axis: K/V gathers, reductions, all-to-all
  comm::Communicator bcast_;  // its duplicate: shard broadcasts and ring hops overlap with axis_
  std::int64_t vocab_rows_;   // Vp / D
  const LocalBatch* batch_ = nullptr;
  // Embedding routing kept from forward for backward.
  std::vector<std::int64_t> emb_order_;            // token index of each sent id (grouped by owner)
  std::vector<std::int64_t> emb_send_, emb_recv_;  // ids per destination / source rank
  std::vector<std::int32_t> emb_recv_ids_;         // the ids this rank looks up
  // LM head state between forward and backward.
  Tensor head_lse_;
  const float* head_input_ = nullptr;
  KvKeep kv_keep_;
};

// TSP as a Strategy for RankModel: TP-style blocks of every weight over the tsp axis, with
// the reduction axes above.
Strategy tsp_strategy(const ModelConfig& config, ParallelGroups& groups);

}  // namespace origami::parallel
