#include "origami/model/gradient_staging.h"

#include "origami/core/error.h"
#include "origami/kernels/reduce.h"

namespace origami {

namespace {
// A layer's tensors in a fixed order (its dense matrices and norms; a mixture of experts has
// no bf16 path and is refused before a run: parallel/training_precision.h).
std::vector<Tensor*> layer_tensors(LayerTensors& t) {
  return {&t.input_norm, &t.wq, &t.wk, &t.wv, &t.wo, &t.post_norm, &t.w_gate, &t.w_up, &t.w_down};
}
}  // namespace

void GradientStaging::open(Tensor& written, const Tensor& held) {
  // Anything still here is a unit whose backward threw: its partial sums are dropped.
  written = Tensor();
  if (held.defined()) written = Tensor(tracker_, MemCategory::Workspace, held.shape());
}

void GradientStaging::close(Tensor& written, Tensor& held) {
  if (!held.defined()) return;
  ORIGAMI_CHECK(written.defined() && written.numel() == held.numel(),
                "a gradient unit closed that was not opened");
  if (written.backed() && held.backed())  // (the dry run backs neither)
    kernels::add_into(held.numel(), held.data<bf16>(), written.f32());
  written = Tensor();
}

void GradientStaging::open_layer(std::int64_t l) {
  const auto i = static_cast<std::size_t>(l);
  const std::vector<Tensor*> w = layer_tensors(written_.layers[i]), h = layer_tensors(held_.layers[i]);
  for (std::size_t k = 0; k < w.size(); ++k) open(*w[k], *h[k]);
}

void GradientStaging::close_layer(std::int64_t l) {
  const auto i = static_cast<std::size_t>(l);
  const std::vector<Tensor*> w = layer_tensors(written_.layers[i]), h = layer_tensors(held_.layers[i]);
  for (std::size_t k = 0; k < w.size(); ++k) close(*w[k], *h[k]);
}

void GradientStaging::open_head() {
  open(written_.head(), held_.head());
  open(written_.final_norm, held_.final_norm);
}

void GradientStaging::close_head() {
  close(written_.head(), held_.head());
  close(written_.final_norm, held_.final_norm);
}

void GradientStaging::open_embedding() { open(written_.embed, held_.embed); }

void GradientStaging::close_embedding() { close(written_.embed, held_.embed); }

}  // namespace origami
