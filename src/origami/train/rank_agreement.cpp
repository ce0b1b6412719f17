#include "origami/train/rank_agreement.h"

#include <exception>
#include <vector>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami {

void on_every_rank(comm::Communicator* world, const std::string& what,
                   const std::function<void()>& fn) {
  std::exception_ptr mine;
  int kind = 0;  // 0 fine, 1 an error, 2 bad input (ConfigError: exit code 2)
  try {
    fn();
  } catch (const ConfigError&) {
    mine = std::current_exception();
    kind = 2;
  } catch (...) {
    mine = std::current_exception();
    kind = 1;
  }
  if (world == nullptr) {
    if (mine) std::rethrow_exception(mine);
    return;
  }
  // The worst kind, and the lowest failing rank (as the maximum of size - rank).
  const std::int64_t n = world->size();
  std::vector<std::int64_t> v{kind, kind != 0 ? n - world->rank() : 0};
  world->all_reduce(v, v, comm::ReduceOp::Max);
  if (mine) std::rethrow_exception(mine);
  if (v[0] == 0) return;
  const std::string message =
      fmt::format("{} failed on rank {} (its own message says why)", what, n - v[1]);
  if (v[0] == 2) throw ConfigError(message);
  throw Error(message);
}

}  // namespace origami
