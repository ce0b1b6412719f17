#include "origami/cli/export_command.h"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "origami/checkpoint/checkpoint.h"
#include "origami/core/error.h"
#include "origami/io/safetensors.h"
#include "origami/kernels/convert.h"
#include "origami/parallel/shard_spec.h"

namespace origami::cli {

ExportCommand::ExportCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "export", "Write a checkpoint as one Hugging Face model.safetensors + config.json");
  command_->add_option("--checkpoint", checkpoint_, "checkpoint folder (DIR/step-N)")->required();
  command_->add_option("--out", out_, "output folder")->required();
  command_
      ->add_option("--dtype", dtype_,
                   "tensor dtype of model.safetensors: fp32, or bf16 (every tensor rounded to "
                   "nearest even, as bf16 models are distributed)")
      ->capture_default_str();
}

void export_checkpoint(const std::string& checkpoint, const std::string& out,
                       const std::string& dtype) {
  if (dtype != "fp32" && dtype != "bf16")
    throw ConfigError(fmt::format("--dtype {}: use fp32 or bf16", dtype));
  ckpt::require_complete(checkpoint, "--checkpoint");
  const nlohmann::json index = ckpt::read_index(checkpoint);
  std::vector<std::string> warnings;
  const ModelConfig config = parse_model_config(index.at("config").dump(), &warnings);
  // The single-device layout: every tensor whole. load() assembles it from any saved layout.
  MemoryTracker tracker("export");
  const std::vector<parallel::ShardSpec> specs = parallel::make_shard_specs(config, 1, 0);
  ModelTensors params = parallel::allocate_sharded(config, specs, tracker, MemCategory::Parameters);
  ckpt::load(checkpoint, config, ckpt::RankState{&specs, &params, nullptr});
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (!std::filesystem::is_directory(out))
    throw ConfigError(fmt::format("cannot create the output folder {}: {}", out, ec.message()));
  io::SafetensorsWriter writer;
  std::vector<Tensor> narrowed;  // kept alive until the write
  narrowed.reserve(named_tensors(params).size());
  for (const NamedTensor& t : named_tensors(params)) {
    if (dtype == "bf16") {
      narrowed.emplace_back(tracker, MemCategory::Parameters, DType::BF16, t.tensor->shape());
      kernels::convert_to_bf16(t.tensor->numel(), t.tensor->f32(),
                               static_cast<bf16*>(narrowed.back().raw()));
      writer.add(t.name, narrowed.back());
    } else {
      writer.add(t.name, *t.tensor);
    }
  }
  writer.set_metadata("format", "pt");
  writer.write(out + "/model.safetensors");
  const std::string json = model_config_to_json(config);
  io::write_file_atomically(out + "/config.json",
                            {reinterpret_cast<const std::uint8_t*>(json.data()), json.size()});
}

int ExportCommand::run() {
  export_checkpoint(checkpoint_, out_, dtype_);
  std::cout << fmt::format("wrote {}/model.safetensors and {}/config.json", out_, out_)
            << std::endl;
  return 0;
}

}  // namespace origami::cli
