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

Precision Precision::parse(const std::string& name, const std::string& grad_reduce) {
  Precision p;
  if (name == "bf16")
    p = bf16();
  else if (name != "fp32")
    throw ConfigError("unknown precision '" + name + "' (known: fp32, bf16)");
  if (grad_reduce == "bf16") {
    if (!p.computes_in_bf16())
      throw ConfigError("--grad-reduce-dtype bf16 needs --precision bf16 (an fp32 run's "
                        "gradients stay fp32): add --precision bf16 or use --grad-reduce-dtype fp32");
    p.gradients = 2;
  } else if (grad_reduce != "fp32") {
    throw ConfigError("unknown --grad-reduce-dtype '" + grad_reduce + "' (known: fp32, bf16)");
  }
  return p;
}

}  // namespace origami
