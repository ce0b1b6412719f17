// The `origami` program: one subcommand per job.
#include <cstdio>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "origami/cli/export_command.h"
#include "origami/cli/generate_command.h"
#include "origami/cli/inspect_command.h"
#include "origami/cli/plan_command.h"
#include "origami/cli/tokenize_command.h"
#include "origami/cli/train_command.h"
#include "origami/core/error.h"
#include "origami/kernels/simd.h"
#include "origami/train/preemption.h"

int main(int argc, char** argv) {
  CLI::App app{"Origami: folded tensor and sequence parallel training of Llama-style models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "origami 0.1");
  origami::cli::TrainCommand train(app);
  origami::cli::ExportCommand export_command(app);
  origami::cli::PlanCommand plan(app);
  origami::cli::GenerateCommand generate(app);
  origami::cli::TokenizeCommand tokenize(app);
  origami::cli::InspectCommand inspect(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's usage errors exit with 106..; a configuration error is exit code 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    origami::kernels::use_simd_target_from_env();
    if (train.selected()) return train.run();
    if (export_command.selected()) return export_command.run();
    if (plan.selected()) return plan.run();
    if (generate.selected()) return generate.run();
    if (tokenize.selected()) return tokenize.run();
    if (inspect.selected()) return inspect.run();
  } catch (const origami::Preempted& e) {
    std::cerr << "origami: " << e.what() << "\n";
    return origami::kPreemptedExitCode;
  } catch (const origami::ConfigError& e) {
    std::cerr << "origami: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "origami: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
