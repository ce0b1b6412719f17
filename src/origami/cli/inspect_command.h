// `origami inspect --model-dir DIR`: what a Hugging Face model folder holds and whether Origami
// imports it (model/model_folder.h). Exit code 0 when importable, 2 when not.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace origami::cli {

class InspectCommand {
 public:
  explicit InspectCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  std::string model_dir_;
};

}  // namespace origami::cli
