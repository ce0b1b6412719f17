// What a dry run does hold for real. It allocates nothing for tensors, but each rank's token
// ids, labels and positions stay backed (the schedules index with them): about 64 B per token
// and rank, measured 78 B per token at tsp 2. A run whose share would exceed the machine's
// available memory is refused up front (--seq 2^30 died after 27 s before this check).
#pragma once

#include <cstdint>

namespace origami {

// ConfigError naming --seq when seq x batch tokens on `world` ranks would not fit.
void check_dry_run_host_memory(std::int64_t seq, std::int64_t batch, int world);

}  // namespace origami
