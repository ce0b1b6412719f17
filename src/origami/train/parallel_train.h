// Whether this process is one rank of an mpirun launch (the training loop, train_loop.cpp, and
// generation choose the MPI transport then).
#pragma once

namespace origami {

// True when this process was started by mpirun (Open MPI's environment).
bool launched_by_mpirun();

}  // namespace origami
