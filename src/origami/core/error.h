// Errors and the one CHECK style used for every precondition and external call.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace origami {

// Base of every error Origami throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A configuration or input that cannot work; the CLI exits with code 2 on it.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// An allocation that would exceed a memory tracker's cap.
class OutOfBudget : public Error {
 public:
  using Error::Error;
};

// A communication failure: timeout, peer failure, mismatched calls.
class CommError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_check_failure(const char* file, int line, const char* expr,
                                      const std::string& message);
}  // namespace detail

}  // namespace origami

// ORIGAMI_CHECK(cond, "format {}", args...): throws origami::Error naming file and line.
#define ORIGAMI_CHECK(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond)) [[unlikely]]                                                             \
      ::origami::detail::throw_check_failure(__FILE__, __LINE__, #cond,                   \
                                             ::fmt::format(__VA_ARGS__));                 \
  } while (0)
