// The checkpoint flags of `origami train` (checkpoint.h does the work).
#pragma once

#include <cstdint>
#include <string>

namespace origami {

struct CheckpointOptions {
  std::string save_dir;         // --save-dir: where step-N folders go ("" = never save)
  std::int64_t save_every = 0;  // --save-every: save after every N-th step (0: only the last)
  std::string resume;           // --resume DIR; "" with save_dir: its newest complete one
  std::string init_from;        // --init-from: parameters only (a checkpoint or an HF folder)
};

}  // namespace origami
