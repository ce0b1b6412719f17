// The dry run's per-thread state (docs/design.md §10): when installed on a thread, kernels charge
// their FLOPs to a virtual clock and return without computing, and communication advances
// the clock by the link model instead of moving bytes. Kernels only call skip_kernel(); they
// know nothing of ranks or transports.
//
// Which threads carry a clock: each rank's thread (installed by the dry-run runner), and each
// communicator's collective worker while it runs a collective (a "stream" clock, kept by the
// communicator, that starts each collective at max(the issuer's clock at issue, the end of
// the previous collective on that communicator)). A wait on a handle joins the waiter's clock with
// the operation's virtual completion time: now = max(now, done).
#pragma once

#include <cstdint>
#include <map>

namespace origami::dryrun {

struct Clock {
  double flop_rate = 1e12;           // FLOP/s one rank computes at
  double now_s = 0;                  // the virtual clock
  double compute_s = 0;              // the part of now_s charged by kernels
  double flops = 0;                  // FLOPs charged
  double attention_flops = 0;        // of which by the attention kernels' products (training)
  std::int64_t comm_elem_bytes = 4;  // bytes per transferred fp32 element (the profile's)
  std::int64_t grad_elem_bytes = 4;  // the same, for a weight gradient (MessagesAt)
  // Optional memory bound (0: off, FLOPs only): a kernel that states the elements it reads
  // is charged max(flops / flop_rate, elements × elem_bytes / mem_bw_Bps) -- decode reads
  // every weight and the KV cache once for a handful of rows, so it is bandwidth-bound.
  double mem_bw_Bps = 0;
  std::int64_t elem_bytes = 4;  // bytes per element a kernel reads (the profile's activations)
  // Per destination world rank: when this stream's link to it is free again. Messages one
  // stream sends to one peer share the link's bandwidth in posting order (the comm layer
  // sets and reads it).
  std::map<int, double> link_free_s;
};

// The clock installed on this thread, or nullptr outside a dry run.
Clock* current();
inline bool active() {
  return current() != nullptr;
}

// In a dry run: advances the clock by flops / flop_rate and returns true (the caller then
// skips the computation). Outside a dry run: false.
bool skip_kernel(double flops);
// The same, for a kernel reading `elements_read` operand elements: charged
// max(flops / flop_rate, elements_read × elem_bytes / mem_bw_Bps) when mem_bw_Bps > 0.
bool skip_kernel(double flops, double elements_read);
// skip_kernel for the training attention kernels, whose FLOPs the clock also counts apart
// (attention_flops: what document masking changes).
bool skip_attention_kernel(double flops, double elements_read);

// now = max(now, t); nothing outside a dry run or for t < 0 (no virtual time recorded).
void join(double t);

// The bytes a transfer of `raw_bytes` of fp32 data is accounted as (raw_bytes × the profile's
// communication element size / 4); raw_bytes outside a dry run or for non-fp32 data.
std::int64_t comm_bytes(bool fp32_data, std::int64_t raw_bytes);

// For its lifetime, the fp32 messages this thread issues are accounted at the element size of
// what a real run sends, instead of the profile's communication size: the weight gradients'
// reductions at the profile's gradient size (--grad-reduce-dtype: 4 or 2 bytes), the fp32
// master weights' all-gathers (the sharded optimizer's) at 4. Collectives issued in its scope
// keep that size on their worker. A no-op outside a dry run.
enum class MessageElement { Gradient, Fp32 };
class MessagesAt {
 public:
  explicit MessagesAt(MessageElement e);
  ~MessagesAt();
  MessagesAt(const MessagesAt&) = delete;
  MessagesAt& operator=(const MessagesAt&) = delete;

 private:
  std::int64_t previous_ = 0;
};

// Installs `clock` on this thread for its lifetime (restoring the previous one after).
class Install {
 public:
  explicit Install(Clock* clock);
  ~Install();
  Install(const Install&) = delete;
  Install& operator=(const Install&) = delete;

 private:
  Clock* previous_;
};

}  // namespace origami::dryrun
