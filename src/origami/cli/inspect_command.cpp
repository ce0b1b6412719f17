#include "origami/cli/inspect_command.h"

#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "origami/model/model_folder.h"

namespace origami::cli {

InspectCommand::InspectCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "inspect", "Describe a Hugging Face model folder and say what Origami would refuse");
  command_->add_option("--model-dir", model_dir_, "the folder: config.json, safetensors, ...")
      ->required();
}

int InspectCommand::run() {
  const ModelFolderReport r = inspect_model_folder(model_dir_);
  std::string out = fmt::format("model folder {}\n", r.dir);
  if (r.config) {
    const ModelConfig& c = *r.config;
    out += fmt::format("  parameters: {} (from config.json), {} stored\n", c.num_parameters(),
                       r.stored_parameters);
    out += fmt::format(
        "  layers {}, hidden {}, heads {}, kv heads {}, head_dim {}, ffn {}, vocab {}, max "
        "positions {}\n",
        c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
        c.head_dim(), c.intermediate_size, c.vocab_size, c.max_position_embeddings);
    if (c.is_moe())
      out += fmt::format(
          "  mixture of experts: {} experts of ffn {}, {} per token, router_aux_loss_coef {} "
          "(trains under --strategy single, dp, tp, tpsp, sp and tsp; docs/moe.md)\n",
          c.num_local_experts, c.intermediate_size, c.num_experts_per_tok,
          c.router_aux_loss_coef);
    out += fmt::format("  rope: theta {}, scaling {}\n", c.rope_theta, describe(c.rope_scaling));
    out += fmt::format("  embeddings: {}\n", c.tie_word_embeddings
                                                ? "tied (one table: embedding and LM head)"
                                                : "untied (lm_head.weight of its own)");
  }
  std::string dtypes;
  for (const auto& [name, n] : r.dtype_tensors)
    dtypes += fmt::format("{}{} ({} tensors)", dtypes.empty() ? "" : ", ", name, n);
  out += fmt::format("  dtypes: {}\n", dtypes.empty() ? "none" : dtypes);
  out += fmt::format("  shards: {}{}\n", r.shards.size(),
                     r.shards.empty() ? ""
                                      : fmt::format(" ({}{})", fmt::join(r.shards, ", "),
                                                    r.indexed ? ", from the index" : ""));
  out += fmt::format("  tokenizer: {}\n",
                     r.tokenizer_kind.empty()
                         ? "none (the byte tokenizer: 256 ids)"
                         : fmt::format("{}, {} tokens", r.tokenizer_kind, r.tokenizer_vocab));
  out += fmt::format("  eos ids (generation_config.json): {}\n",
                     r.eos.empty() ? "none" : fmt::format("{}", fmt::join(r.eos, ", ")));
  for (const std::string& n : r.notes) out += fmt::format("  note: {}\n", n);
  if (r.importable()) {
    out += "importable: yes\n";
  } else {
    out += fmt::format("importable: no, {} refusal(s):\n", r.refusals.size());
    for (const std::string& why : r.refusals) out += fmt::format("  - {}\n", why);
  }
  std::cout << out << std::flush;
  return r.importable() ? 0 : 2;
}

}  // namespace origami::cli
