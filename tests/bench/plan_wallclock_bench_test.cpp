// Smoke test of the planner's wall-clock benchmark (bench/plan_wallclock_bench.cpp), when the
// program has been built: --quick runs every default row on a tiny model and writes one CSV
// row per layout. Checks what does not depend on the clock: the rows, that every prediction
// and measurement is there, that one device predicts no communication and every parallel
// layout some, and that bad row words are refused naming what to use. Never checks a time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::filesystem::path program() {
  return std::filesystem::path(ORIGAMI_BINARY_DIR) / "bench" / "plan_wallclock_bench";
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  return cells;
}

TEST(PlanWallclockBench, QuickWritesEveryRow) {
  if (!std::filesystem::exists(program())) GTEST_SKIP() << program() << " not built";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "plan_wallclock_bench_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path csv = dir / "quick.csv";
  const std::string cmd =
      program().string() + " --quick --csv " + csv.string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(csv);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const std::vector<std::string> header = split(line);
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* c : {"layout", "recompute", "pred_compute_s", "dry_compute_s", "meas_off_s",
                        "pred_exposed_s", "pred_step_s", "dry_step_s", "meas_on_s"})
    ASSERT_TRUE(col.count(c)) << "no column " << c << " in " << line;
  std::vector<std::string> rows;
  while (std::getline(f, line)) {
    const std::vector<std::string> c = split(line);
    ASSERT_EQ(c.size(), header.size()) << line;
    const std::string name = c[col["layout"]] + ":" + c[col["recompute"]];
    rows.push_back(name);
    for (const char* k : {"pred_compute_s", "dry_compute_s", "meas_off_s", "pred_step_s",
                          "dry_step_s", "meas_on_s"})
      EXPECT_GT(std::stod(c[col[k]]), 0) << name << " " << k;
    const double exposed = std::stod(c[col["pred_exposed_s"]]);
    if (c[col["layout"]] == "single")
      EXPECT_EQ(exposed, 0) << name;
    else
      EXPECT_GT(exposed, 0) << name;
  }
  const std::vector<std::string> expected = {"single:none", "dp:none",  "tp:none",
                                             "tpsp:none",   "sp:none",  "tsp:none",
                                             "tp:full",     "tsp:full", "single:full"};
  EXPECT_EQ(rows, expected);
  std::filesystem::remove_all(dir);
}

TEST(PlanWallclockBench, RefusesBadRowsNamingTheChoices) {
  if (!std::filesystem::exists(program())) GTEST_SKIP() << program() << " not built";
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / "plan_wallclock_bench_refusal.txt";
  // ("pp" is a row since the planner predicts pipeline stages.)
  for (const char* rows : {"tp:sometimes", "zb", "tpxsp"}) {
    const std::string cmd = program().string() + " --quick --rows " + rows + " > " +
                            out.string() + " 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("error:"), std::string::npos) << rows << ": " << text;
  }
  std::filesystem::remove(out);
}

}  // namespace
