// The `origami` program.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "origami/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Origami: folded tensor and sequence parallel training of Llama-style models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "origami 0.1");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
