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

Precision Precision::parse(const std::string& name) {
  if (name == "fp32") return fp32();
  if (name == "bf16") return bf16();
  throw ConfigError("unknown precision '" + name + "' (known: fp32, bf16)");
}

}  // namespace origami
