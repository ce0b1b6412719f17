// TSP (docs/design.md §3-5, docs/tsp.md): folded tensor and sequence parallelism on ONE axis of
// D ranks. Rank r holds 1/D of every weight (the same blocks a tensor-parallel rank r would
// hold) AND 1/D of the tokens (the sequence layout of rank r, zigzag or contiguous). Blocks
// reach the weights they do not hold by moving the weights, never the activations of other
// ranks' tokens (except K/V inside attention). The schedule -- per-rank shapes, each block's
// messages and their backward conjugates, bytes and resident sets -- is stated in schedule.h;
// the blocks: embedding (tsp_ops.cpp), attention (tsp_attention.cpp), MLP (tsp_mlp.cpp), LM
// head (tsp_head.cpp), the backward rings (tsp_grad_ring.h).
//
// Reduction groups: loss sum and count over tsp x dp (each rank holds distinct tokens); weight
// shards' gradients are complete on their owner after the blocks (then summed over dp);
// RMSNorm gradients summed over tsp x dp; gradient norm: shards' squares summed over tsp,
// norms counted once (assign_reduction_axes in registry.h states them). The tsp axis is the
// plan's token axis (ParallelGroups::tokens(), named "tsp").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "origami/model/moe.h"
#include "origami/parallel/attention_cp.h"
#include "origami/parallel/moe_balance.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/strategy_context.h"
#include "origami/parallel/strategies/tsp/schedule.h"

namespace origami::parallel {


// Not final: the allgather schedule (strategies/tsp_allgather/) is TSP's layout, embedding and
// LM head with its own attention and MLP blocks.
class TspOps : public StrategyContext {
 public:
  TspOps(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
         ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker);
  TspOps(const TspOps&) = delete;
  TspOps& operator=(const TspOps&) = delete;
  ~TspOps() override;

  void set_batch(const LocalBatch* batch) override;

  std::int64_t stream_rows() const override;
  void embed_forward(float* x) override;
  void embed_backward(const float* dx) override;
  void attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                         const ForwardStep& step) override;
  void attention_backward(std::int64_t l, const float* n, const AttentionSaved& s, const float* dx,
                          float* dn) override;
  void mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) override;
  void mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                    float* dn) override;
  kernels::LossSum head_forward(const float* nf, bool with_backward) override;
  void head_backward(float grad_scale, float* dnf) override;
  // Mixture of experts: the weight ring over every expert's shard (tsp_moe.cpp), or the
  // expert schedule's all-to-alls to whole experts (tsp_moe_expert.cpp).
  void set_aux_weight(double weight) override { moe_job_.set_aux_weight(weight); }
  void set_pass(int id) override;
  double router_aux_loss() const override { return moe_job_.router_aux_loss(); }
  MoeLoad moe_load() const override { return moe_job_.load(); }
  // The expert schedule's exchange of layer l's last forward in the current pass (set_pass):
  // per expert (owners in rank order), this rank's kept assignments, and per source rank and
  // local expert the assignments it received.
  struct MoeExchange {
    std::int64_t local = 0;              // E/D: experts per rank
    std::vector<std::int64_t> sent;      // [E]
    std::vector<std::int64_t> received;  // [D, E/D]
    std::int64_t to(int owner) const;    // rows sent to `owner` (this rank included)
    std::int64_t from(int source) const; // rows received from `source`
    // Per rank, rows x width floats: to each owner / from each source.
    std::vector<std::int64_t> to_counts(std::int64_t width) const;
    std::vector<std::int64_t> from_counts(std::int64_t width) const;
    TspExpertRows rows(int self) const;  // the ones that cross the axis (schedule.h)
    std::int64_t kept() const;           // every row sent (this rank's kept assignments)
  };
  const MoeExchange& moe_exchange(std::int64_t l) const {
    return (*moe_exchange_)[static_cast<std::size_t>(l)];
  }

  // The duplicate of the axis carrying the shard broadcasts and ring hops (its stats are the
  // weight traffic; the axis' own are K/V, dK/dV, gradient reductions and the embedding's).
  comm::Communicator& shard_comm() { return bcast_; }
  // The second duplicate, carrying the attention weight-gradient reduces (dP_j to its owner),
  // so that they run while the next head group's K/V gather runs on the axis.
  comm::Communicator& grad_comm() { return grads_comm_; }
  // The layer whose P_0 is in flight, -1 when none (between steps: nothing may be left).
  std::int64_t prefetched_layer() const { return prefetch_.layer; }

  // Inference (prefill, infer/engine.h): when set, at head-group step j == this rank the
  // attention forward of layer l copies the gathered K/V of its own head group to keep(l)
  // (SequenceAxis::keep_k / keep_v): the KV cache sharded by head group, no extra traffic.
  using KvKeep = std::function<std::pair<float*, float*>(std::int64_t layer)>;
  void set_kv_keep(KvKeep keep) { kv_keep_ = std::move(keep); }

 protected:
  std::int64_t rows() const;
  TspRankShapes rank_shapes() const;  // schedule.h's terms for this rank and batch
  AttentionDims attention_dims() const;
  // Head group j's slice of the layer's side-by-side saved q, k, v, out, lse (written by the
  // forward, read by the backward in place).
  AttentionSavedView saved_group(AttentionSaved& s, int j) const;
  AttentionSavedReadView saved_group(const AttentionSaved& s, int j) const;
  std::int64_t attention_floats() const;  // packed P_j: W_Q, W_K, W_V rows, W_O columns
  std::int64_t mlp_floats() const;        // packed M_j: gate, up rows, down columns
  // The owner packs its shard into buf; every rank then receives it (async, on bcast_).
  // (buf is allocated, as CommBuffers, when empty.)
  comm::Handle broadcast_attention_shard(std::int64_t l, int owner, Tensor& buf);
  // Layer l's P_0 and P_1 (D > 1) into buf[0], buf[1] with their handles: the prefetched ones
  // (docs/design.md §3: "P_0 was prefetched during the previous block's MLP"), the others broadcast
  // now.
  void first_attention_shards(std::int64_t l, Tensor (&buf)[kTspShardBuffers],
                              comm::Handle (&handle)[kTspShardBuffers]);
  // Starts the broadcast of layer l's P_j (j = 0, then 1) into buf, kept until that layer's
  // next attention call takes it. Nothing when l is not a layer, j is not a head group or not
  // among the kTspPrefetchedShards (schedule.h), or (j = 1) P_0 of l is not prefetched.
  void prefetch_attention_shard(std::int64_t l, int j, Tensor buf);
  void drop_prefetch();  // waits and frees a prefetch nobody took
  void pack_mlp_shard(std::int64_t l, Tensor& out) const;  // in the weights' dtype
  // The dtype layer l's matrices are read in, so the shards it moves: bf16 under training's
  // compute copy or the bf16 inference, else fp32 (gradients always travel in fp32).
  DType weight_dtype(std::int64_t l) const {
    return matrices().layers[static_cast<std::size_t>(l)].w_gate.dtype();
  }
  // Mixture of experts (tsp_moe.cpp): the layer's blocks, the packed shard of every expert.
  MoeDims moe_dims() const;
  std::int64_t moe_floats() const;
  void pack_moe_shard(std::int64_t l, float* out) const;
  // The backward's routing, from the saved logits or (recompute mlp) logits recomputed.
  MoeRouting moe_backward_routing(std::int64_t l, const float* n, MlpSaved& s);
  void moe_router_backward_rows(std::int64_t l, const MoeRouting& routing, const float* logits,
                                const std::vector<double>& dweight, const float* n, float* dn);
  void moe_forward(std::int64_t l, const float* n, MlpSaved& s, float* x);
  void moe_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx, float* dn);
  bool expert_schedule() const { return groups_.plan().moe_schedule == MoeSchedule::Expert; }
  void moe_expert_forward(std::int64_t l, const float* n, MlpSaved& s, float* x);
  void moe_expert_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dy,
                           float* dn);
  // The routing's kept assignments' counts exchanged with the owners (all-to-all of E/D
  // counts to each rank) into moe_exchange_[l].
  void moe_exchange_counts(std::int64_t l, const MoeRouting& routing);
  // Rows of `width` floats between the packed order of this rank's kept assignments (grouped
  // by owner, then expert) and the owner's expert-major order (each local expert's rows from
  // every source together); one all-to-all each way.
  Tensor moe_to_owners(const MoeExchange& ex, const float* packed, std::int64_t width,
                       MemCategory category);
  Tensor moe_from_owners(const MoeExchange& ex, const float* expert_major, std::int64_t width);

  int size_, rank_;
  comm::Communicator& axis_;  // the tsp axis: K/V gathers, reductions, all-to-all
  comm::Communicator bcast_;  // its duplicate: shard broadcasts and ring hops overlap with axis_
  comm::Communicator grads_comm_;  // a second duplicate: the dP_j reduces
  // The next attention call's P_0 and P_1, in flight since the end of the previous attention
  // call (forward: layer l+1's during layer l's last head groups and MLP; backward: layer
  // l-1's during layer l's last groups, then layer l-1's MLP backward or recomputed forward).
  struct ShardPrefetch {
    std::int64_t layer = -1;
    int count = 0;  // shards P_0 .. P_{count-1}
    Tensor buf[kTspShardBuffers];
    comm::Handle handle[kTspShardBuffers];
  };
  ShardPrefetch prefetch_;
  std::int64_t vocab_rows_;   // Vp / D
  // Embedding routing kept from forward for backward, per micro-batch (a pipeline stage runs
  // several micro-batches' forwards before their backwards); all dropped at set_batch(nullptr).
  struct EmbeddingRoute {
    std::vector<std::int64_t> order;       // token index of each sent id (grouped by owner)
    std::vector<std::int64_t> send, recv;  // ids per destination / source rank
    std::vector<std::int32_t> recv_ids;    // the ids this rank looks up
  };
  std::map<const LocalBatch*, EmbeddingRoute> emb_routes_;
  // LM head state between forward and backward.
  Tensor head_lse_;
  const float* head_input_ = nullptr;
  KvKeep kv_keep_;
  // Mixture of experts: the balance over the job's micro-batch (tsp x dp), per layer.
  MoeJobBalance moe_job_;
  // The expert schedule's, per pass (set_pass) and layer; moe_exchange_ is the current pass'.
  std::map<int, std::vector<MoeExchange>> moe_exchanges_;
  std::vector<MoeExchange>* moe_exchange_ = nullptr;
};

// TSP as a Strategy for RankModel: TP-style blocks of every weight over the tsp axis, with
// the reduction axes above.
Strategy tsp_strategy(const ModelConfig& config, ParallelGroups& groups);

// The expert schedule's specs (docs/moe.md): every expert tensor of `specs` (make_shard_specs
// on an axis of D ranks) held whole by its owner (tsp_expert_owner), rank `rank` holding
// the others as empty blocks. E must divide by D (validate_plan).
void own_whole_experts(const ModelConfig& config, int D, int rank, std::vector<ShardSpec>& specs);

}  // namespace origami::parallel
