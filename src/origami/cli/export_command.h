// `origami export`: a checkpoint (any layout) to one Hugging Face Llama model.safetensors plus
// config.json, loadable by transformers and by the PyTorch oracle.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace origami::cli {

class ExportCommand {
 public:
  explicit ExportCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  std::string checkpoint_;
  std::string out_;
  std::string dtype_ = "fp32";
};

// Writes out/model.safetensors and out/config.json from the checkpoint folder `checkpoint`,
// its tensors in `dtype`: "fp32" (as trained), or "bf16" (each rounded to nearest even).
void export_checkpoint(const std::string& checkpoint, const std::string& out,
                       const std::string& dtype = "fp32");

}  // namespace origami::cli
