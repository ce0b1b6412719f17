// Runs the `origami` program as a user would, for the command-line tests: separate standard
// output and error, and the exit code (-1 when it did not exit normally).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace origami::cli_test {

struct CliRun {
  int code;
  std::string out, err;
  std::string all() const { return out + err; }  // standard output, then standard error
};

// The contents of `path`, which is then removed.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

// A fresh path prefix in the test's temporary directory.
inline std::string temp_base() {
  static int counter = 0;
  return ::testing::TempDir() + "origami_cli_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++);
}

// `launcher` prefixes the command (e.g. "mpirun -np 2 ... ").
inline CliRun origami(const std::string& args, const std::string& launcher = "") {
  const std::string base = temp_base();
  const std::string cmd = launcher + std::string(ORIGAMI_BINARY_DIR) + "/origami " + args +
                          " > " + base + ".out 2> " + base + ".err";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base + ".out"), slurp(base + ".err")};
}

// The "loss X" values of the step lines.
inline std::vector<std::string> losses(const std::string& out) {
  std::vector<std::string> v;
  const std::regex re("step +[0-9]+ +loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    v.push_back((*it)[1]);
  return v;
}

// The streamed text of `generate`: the output's first line.
inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace origami::cli_test
