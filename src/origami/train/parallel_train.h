// The training loop of the parallel strategies (dp, tp, tpsp, sp/cp and their meshes) on
// either transport: in-process ranks (threads) or MPI processes launched by mpirun (chosen
// automatically when the program runs under mpirun). Every rank draws the same global batches
// from the same sampler and keeps its data-parallel share and its layout's rows of them, so a
// run equals the single-device run with the same seed up to rounding.
#pragma once

#include <functional>
#include <string>

#include "origami/train/trainer.h"

namespace origami {

// True when this process was started by mpirun (Open MPI's environment).
bool launched_by_mpirun();

// Runs the whole loop (train() checks the options first and calls this); `log` is called on
// world rank 0 only.
TrainResult train_parallel(const TrainOptions& options,
                           const std::function<void(const std::string&)>& log);

}  // namespace origami
