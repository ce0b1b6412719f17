#include "origami/cli/plan_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <vector>

#include "origami/core/error.h"
#include "origami/plan/layouts.h"

namespace origami::cli {

void plot_memory_vs_sequence(const ModelConfig& m, int world, const plan::Workload& w,
                             const plan::Hardware& hw, const std::string& png) {
  // Sequences from w.seq / 16 to 4 w.seq, doubling: the best (lowest-memory) layout of each
  // strategy at each length, in GiB per device.
  std::vector<std::int64_t> seqs;
  for (std::int64_t s = std::max<std::int64_t>(w.seq / 16, 64); s <= 4 * w.seq; s *= 2)
    seqs.push_back(s);
  std::vector<std::string> names;
  std::map<std::string, std::vector<double>> gib;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    plan::Workload x = w;
    x.seq = seqs[i];
    x.documents = nullptr;  // memory only (the sample's rows are of w.seq)
    for (const plan::Layout& l : parallel::enumerate_meshes(world)) {
      const std::string name = parallel::family_name(l);
      auto [it, fresh] = gib.try_emplace(name, seqs.size(), std::numeric_limits<double>::quiet_NaN());
      if (fresh) names.push_back(name);
      try {
        const double g = double(plan::predict(m, l, x, hw).memory.total()) / (1 << 30);
        if (std::isnan(it->second[i]) || g < it->second[i]) it->second[i] = g;
      } catch (const ConfigError&) {
      }
    }
  }
  // Strategies refused at every length (e.g. DP with one sequence) draw nothing: left out.
  std::erase_if(names, [&](const std::string& n) {
    return std::all_of(gib[n].begin(), gib[n].end(), [](double g) { return std::isnan(g); });
  });
  if (names.empty())
    throw ConfigError("--plot: no layout can run this model at any of the plotted lengths");
  const std::string dat = png + ".dat", gp = png + ".gp";
  {
    std::ofstream d(dat);
    if (!d) throw ConfigError(fmt::format("--plot: cannot write '{}'", dat));
    d << "# seq";
    for (const auto& n : names) d << " " << n;
    d << "\n";
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      d << seqs[i];
      for (const auto& n : names) {
        const double g = gib[n][i];
        d << " " << (std::isnan(g) ? std::string("NaN") : fmt::format("{:.4f}", g));
      }
      d << "\n";
    }
  }
  {
    std::ofstream g(gp);
    if (!g) throw ConfigError(fmt::format("--plot: cannot write '{}'", gp));
    g << "set terminal png size 1000,650\n";
    g << fmt::format("set output '{}'\n", png);
    g << fmt::format("set title 'per-device memory, {} devices, micro-batch {}, {}'\n", world,
                     w.batch, hw.name);
    g << "set xlabel 'sequence length (tokens)'\nset ylabel 'GiB per device'\n";
    g << "set logscale xy 2\nset key outside right\nset grid\n";
    g << "plot ";
    for (std::size_t k = 0; k < names.size(); ++k)
      g << fmt::format("'{}' using 1:{} with linespoints title '{}', ", dat, k + 2, names[k]);
    g << fmt::format("{} with lines dashtype 2 title 'device memory'\n",
                     double(hw.memory_bytes) / (1 << 30));
  }
  if (std::system(fmt::format("gnuplot '{}'", gp).c_str()) != 0)
    throw ConfigError(fmt::format("--plot: gnuplot failed on '{}' (is gnuplot installed?); the "
                                  "data is in '{}'",
                                  gp, dat));
}

}  // namespace origami::cli
