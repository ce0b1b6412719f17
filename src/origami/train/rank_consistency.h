// Every rank of a run must be started with the same configuration (issue 14, item 5): an
// MPMD launch such as `mpirun -np 1 origami ... --data a.txt : -np 1 origami ... --data
// b.txt` otherwise trains on mixed tokens and exits 0. At start, each rank's model config,
// the flags that must agree and a fingerprint of its data are compared across the world; a
// mismatch stops every rank with a ConfigError naming the flag.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/data/dataset.h"
#include "origami/train/trainer.h"

namespace origami {

// (flag, value) of everything that must agree, as text; "data" is the token fingerprint.
std::vector<std::pair<std::string, std::string>> agreed_fields(const TrainOptions& options,
                                                               const data::TokenDataset& data);

// Collective. ConfigError on every rank when any field differs from world rank 0's.
void check_ranks_agree(comm::Communicator& world, const TrainOptions& options,
                       const data::TokenDataset& data);

}  // namespace origami
