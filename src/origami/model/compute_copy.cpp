#include "origami/model/compute_copy.h"

#include <vector>

#include "origami/core/error.h"
#include "origami/kernels/convert.h"

namespace origami {

ModelTensors allocate_compute_copy(ModelTensors& master, MemoryTracker& tracker) {
  ModelTensors copy;
  copy.tied = master.tied;
  copy.layers.resize(master.layers.size());
  for (const LayerTensors& L : master.layers)
    if (!L.experts.empty())
      throw ConfigError(
          "--precision bf16 trains dense models only (a mixture of experts' "
          "router and experts have no bf16 path yet): use --precision fp32");
  const std::vector<NamedTensor> from = named_tensors(master), to = named_tensors(copy);
  ORIGAMI_CHECK(from.size() == to.size(), "compute copy: {} tensors for a master of {}", to.size(),
                from.size());
  for (std::size_t i = 0; i < from.size(); ++i)
    if (!from[i].is_norm && from[i].tensor->defined())
      *to[i].tensor =
          Tensor(tracker, MemCategory::Parameters, DType::BF16, from[i].tensor->shape());
  return copy;
}

void refresh_compute_copy(ModelTensors& master, ModelTensors& compute) {
  const std::vector<NamedTensor> from = named_tensors(master), to = named_tensors(compute);
  ORIGAMI_CHECK(from.size() == to.size(), "compute copy: {} tensors for a master of {}", to.size(),
                from.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    const Tensor& m = *from[i].tensor;
    Tensor& c = *to[i].tensor;
    if (!c.defined() || !m.backed() || !c.backed()) continue;
    ORIGAMI_CHECK(m.numel() == c.numel() && c.dtype() == DType::BF16,
                  "compute copy of {}: {} bf16 elements for {}", from[i].name, c.numel(),
                  m.numel());
    kernels::convert_to_bf16(m.numel(), m.f32(), static_cast<bf16*>(c.raw()));
  }
}

}  // namespace origami
