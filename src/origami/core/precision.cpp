#include "origami/core/precision.h"

#include "origami/core/error.h"

namespace origami {

Precision Precision::fp32() { return Precision{}; }

Precision Precision::bf16() {
  Precision p;
  p.name = "bf16";
  p.parameters = 2;
  p.master = 4;
  p.activations = 2;
  p.communication = 2;
  return p;
}

void Precision::apply_to(MemoryTracker& tracker) const {
  tracker.set_element_bytes(MemCategory::Parameters, parameters, 1);
  tracker.set_element_bytes(MemCategory::Gradients, gradients, 1);
  tracker.set_element_bytes(MemCategory::OptimizerState, optimizer_per_parameter(), 2);
  tracker.set_element_bytes(MemCategory::Activations, activations, 1);
  tracker.set_element_bytes(MemCategory::Workspace, activations, 1);
  tracker.set_element_bytes(MemCategory::CommBuffers, communication, 1);
  tracker.set_element_bytes(MemCategory::Logits, logits, 1);
  tracker.set_element_bytes(MemCategory::KvCache, activations, 1);  // K/V as the activations
}

Precision Precision::parse(const std::string& name) {
  if (name == "fp32") return fp32();
  if (name == "bf16") return bf16();
  throw ConfigError("unknown precision '" + name + "' (known: fp32, bf16)");
}

}  // namespace origami
