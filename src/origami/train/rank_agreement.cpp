#include "origami/train/rank_agreement.h"

#include <algorithm>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami {

namespace {

// The text of `e` (empty for none).
std::string message_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

// `text` on `root`, sent to every rank (at most 4000 characters).
std::string broadcast_text(comm::Communicator& world, std::string text, int root) {
  std::vector<std::int64_t> n{static_cast<std::int64_t>(std::min<std::size_t>(text.size(), 4000))};
  world.broadcast(n, root);
  std::vector<std::int32_t> chars(static_cast<std::size_t>(n[0]));
  for (std::size_t i = 0; i < chars.size() && world.rank() == root; ++i)
    chars[i] = static_cast<unsigned char>(text[i]);
  world.broadcast(chars, root);
  text.assign(chars.begin(), chars.end());
  return text;
}

}  // namespace

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
  if (v[0] == 0) return;
  // Every rank reports the lowest failing rank's message: whichever rank's error the run
  // shows first (the threads transport shows the first thrown), it says why.
  const int root = static_cast<int>(n - v[1]);
  const std::string why = broadcast_text(*world, message_of(mine), root);
  if (mine && world->rank() == root) std::rethrow_exception(mine);
  const std::string message = fmt::format("{} failed on rank {}: {}", what, root, why);
  if (v[0] == 2) throw ConfigError(message);
  throw Error(message);
}

}  // namespace origami
