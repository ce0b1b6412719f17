#include "origami/core/error.h"

namespace origami::detail {

void throw_check_failure(const char* file, int line, const char* expr,
                         const std::string& message) {
  throw Error(fmt::format("{} ({}:{}: check '{}' failed)", message, file, line, expr));
}

}  // namespace origami::detail
