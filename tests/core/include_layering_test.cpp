// The layering of src/origami (docs/design.md §11): a folder includes only its own headers and
// those of the layers below it, and folders on one layer include none of each other's. The
// order is read from the design page's `layers:` line, so the page and this check cannot
// disagree; every folder under src/origami must be placed on it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

const fs::path kSource = fs::path(ORIGAMI_SOURCE_DIR);

// Folder -> layer (0 = bottom), from "`layers: a < b, c < d`".
std::map<std::string, int> parse_layers(const std::string& line) {
  std::map<std::string, int> layer;
  const std::size_t colon = line.find(':');
  std::stringstream rest(line.substr(colon + 1));
  std::string level;
  int n = 0;
  while (std::getline(rest, level, '<')) {
    std::stringstream names(level);
    std::string name;
    while (std::getline(names, name, ',')) {
      name.erase(std::remove_if(name.begin(), name.end(),
                                [](char c) { return c == ' ' || c == '`'; }),
                 name.end());
      if (!name.empty()) layer[name] = n;
    }
    ++n;
  }
  return layer;
}

// The `layers:` line of docs/design.md, or "" when it has none.
std::string design_layers_line() {
  std::ifstream in(kSource / "docs/design.md");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("`layers:", 0) == 0) return line;
  return "";
}

struct Include {
  std::string file;    // relative to src/origami, e.g. "infer/engine.cpp"
  int line;            // 1-based
  std::string target;  // e.g. "checkpoint/checkpoint.h"
};

// Every `#include "origami/..."` of the files under `root` (src/origami).
std::vector<Include> origami_includes(const fs::path& root) {
  static const std::regex include(R"(^\s*#\s*include\s*"origami/([^"]+)\")");
  std::vector<Include> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cpp") continue;
    std::ifstream in(e.path());
    std::string text;
    int n = 0;
    std::smatch m;
    while (std::getline(in, text)) {
      ++n;
      if (std::regex_search(text, m, include))
        out.push_back({fs::relative(e.path(), root).generic_string(), n, m[1].str()});
    }
  }
  return out;
}

std::string folder_of(const std::string& relative) {
  return relative.substr(0, relative.find('/'));
}

// One sentence per include that runs upward or sideways, or names an unplaced folder.
std::vector<std::string> violations(const std::map<std::string, int>& layer,
                                    const std::vector<Include>& includes) {
  std::vector<std::string> out;
  for (const Include& i : includes) {
    const std::string from = folder_of(i.file), to = folder_of(i.target);
    if (from == to) continue;
    const auto a = layer.find(from), b = layer.find(to);
    if (a == layer.end() || b == layer.end()) {
      out.push_back(i.file + ":" + std::to_string(i.line) + " includes origami/" + i.target +
                    ": folder " + (a == layer.end() ? from : to) +
                    " is on no layer of docs/design.md's `layers:` line");
    } else if (b->second >= a->second) {
      out.push_back(i.file + ":" + std::to_string(i.line) + " includes origami/" + i.target +
                    (b->second > a->second ? ", which runs upward (" : ", a folder of its own layer (") +
                    from + " is on layer " + std::to_string(a->second) + ", " + to + " on layer " +
                    std::to_string(b->second) + "): move the shared piece below both");
    }
  }
  return out;
}

TEST(IncludeLayering, TheCheckNamesTheFileAndTheIncludeThatRunsUpward) {
  const auto layer = parse_layers("`layers: core < kernels, io < model`");
  EXPECT_EQ(layer, (std::map<std::string, int>{{"core", 0}, {"kernels", 1}, {"io", 1}, {"model", 2}}));
  const std::vector<std::string> v =
      violations(layer, {{"model/a.cpp", 3, "core/x.h"},
                         {"model/a.cpp", 4, "model/b.h"},
                         {"kernels/k.cpp", 7, "model/m.h"},
                         {"kernels/k.cpp", 8, "io/f.h"},
                         {"io/f.cpp", 2, "cli/c.h"}});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_NE(v[0].find("kernels/k.cpp:7 includes origami/model/m.h, which runs upward"),
            std::string::npos)
      << v[0];
  EXPECT_NE(v[1].find("kernels/k.cpp:8 includes origami/io/f.h, a folder of its own layer"),
            std::string::npos)
      << v[1];
  EXPECT_NE(v[2].find("folder cli is on no layer"), std::string::npos) << v[2];
}

TEST(IncludeLayering, EveryFolderOfSrcOrigamiIsOnALayer) {
  const std::string line = design_layers_line();
  ASSERT_FALSE(line.empty()) << "docs/design.md has no line starting with `layers:";
  const auto layer = parse_layers(line);
  for (const fs::directory_entry& e : fs::directory_iterator(kSource / "src/origami")) {
    if (!e.is_directory()) continue;
    EXPECT_TRUE(layer.count(e.path().filename().string()))
        << "src/origami/" << e.path().filename().string()
        << " is on no layer of docs/design.md's `layers:` line (" << line << ")";
  }
}

TEST(IncludeLayering, NoIncludeUnderSrcOrigamiRunsUpward) {
  const auto layer = parse_layers(design_layers_line());
  const std::vector<Include> includes = origami_includes(kSource / "src/origami");
  ASSERT_GT(includes.size(), 100u);  // the walk found the sources
  for (const std::string& v : violations(layer, includes)) ADD_FAILURE() << v;
}

}  // namespace
