#include "origami/cli/dry_run_flags.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "origami/core/error.h"

namespace origami::cli {

std::vector<CLI::Option*> add_link_flags(CLI::App& command, comm::LinkModel& link,
                                         const std::string& scope) {
  const struct {
    const char* flag;
    double* value;
    const char* help;
  } numbers[] = {{"--intra-alpha", &link.intra_alpha_s, "intra-node latency (s)"},
                 {"--intra-beta", &link.intra_beta_Bps, "intra-node bandwidth (B/s)"},
                 {"--inter-alpha", &link.inter_alpha_s, "inter-node latency (s)"},
                 {"--inter-beta", &link.inter_beta_Bps, "inter-node bandwidth (B/s)"}};
  std::vector<CLI::Option*> options;
  for (const auto& n : numbers)
    options.push_back(command.add_option(n.flag, *n.value, scope + n.help)->capture_default_str());
  options.push_back(command
                        .add_option("--devices-per-node", link.devices_per_node,
                                    scope + "consecutive world ranks per node (link classes)")
                        ->capture_default_str());
  return options;
}

std::string dry_run_links(comm::LinkModel link) {
  link.enabled = true;
  return link.describe();
}

void write_json_file(const std::string& path, const std::string& json) {
  std::ofstream f(path);
  if (!f) throw ConfigError(fmt::format("cannot write --json {}", path));
  f << json << "\n";
}

}  // namespace origami::cli
