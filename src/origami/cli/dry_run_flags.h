// What `origami train` and `origami generate` share for their dry runs and link models: the
// link flags, the line that states the links a dry run applies, and the --json file.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "origami/comm/link_model.h"

namespace origami::cli {

// --intra-alpha, --intra-beta, --inter-alpha, --inter-beta and --devices-per-node bound to
// `link`, each help text prefixed with `scope` (e.g. "dry run: "); returns the options.
std::vector<CLI::Option*> add_link_flags(CLI::App& command, comm::LinkModel& link,
                                         const std::string& scope);

// The links as a dry run applies them (always on, whatever `enabled` says).
std::string dry_run_links(comm::LinkModel link);

// Writes `json` and a newline to `path`; ConfigError naming --json if it cannot.
void write_json_file(const std::string& path, const std::string& json);

}  // namespace origami::cli
