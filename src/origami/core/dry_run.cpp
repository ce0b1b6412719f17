#include "origami/core/dry_run.h"

#include <algorithm>

namespace origami::dryrun {

namespace {
thread_local Clock* t_clock = nullptr;
}

Clock* current() {
  return t_clock;
}

bool skip_kernel(double flops) {
  return skip_kernel(flops, 0.0);
}

bool skip_kernel(double flops, double elements_read) {
  Clock* c = t_clock;
  if (c == nullptr) return false;
  double s = flops / c->flop_rate;
  if (c->mem_bw_Bps > 0)
    s = std::max(s, elements_read * static_cast<double>(c->elem_bytes) / c->mem_bw_Bps);
  c->now_s += s;
  c->compute_s += s;
  c->flops += flops;
  return true;
}

bool skip_attention_kernel(double flops, double elements_read) {
  if (!skip_kernel(flops, elements_read)) return false;
  t_clock->attention_flops += flops;
  return true;
}

void join(double t) {
  if (t_clock != nullptr && t >= 0) t_clock->now_s = std::max(t_clock->now_s, t);
}

std::int64_t comm_bytes(bool fp32_data, std::int64_t raw_bytes) {
  if (t_clock == nullptr || !fp32_data) return raw_bytes;
  return raw_bytes / 4 * t_clock->comm_elem_bytes;
}

MessagesAt::MessagesAt(MessageElement e) {
  if (t_clock == nullptr) return;
  previous_ = t_clock->comm_elem_bytes;
  t_clock->comm_elem_bytes = e == MessageElement::Gradient ? t_clock->grad_elem_bytes : 4;
}
MessagesAt::~MessagesAt() {
  if (t_clock != nullptr && previous_ > 0) t_clock->comm_elem_bytes = previous_;
}

Install::Install(Clock* clock) : previous_(t_clock) {
  t_clock = clock;
}
Install::~Install() {
  t_clock = previous_;
}

}  // namespace origami::dryrun
