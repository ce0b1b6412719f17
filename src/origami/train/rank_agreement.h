// Decisions every rank must take together. A rank that fails alone (a checkpoint block it
// cannot read, a flag that differs) and throws would leave the others waiting in their next
// collective until the timeout, and whatever they print meanwhile ("resumed from ...") is
// false. These calls are collective over the world (null: one process).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "origami/comm/communicator.h"

namespace origami {

// Runs `fn` on this rank, then agrees on the outcome: if it threw on any rank, every rank
// throws: the lowest failing rank its own error, the others a ConfigError (when the failure
// was one) or Error naming that rank, `what` and its message.
void on_every_rank(comm::Communicator* world, const std::string& what,
                   const std::function<void()>& fn);

}  // namespace origami
