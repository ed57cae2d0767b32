// The MPI job the dist tests run in: one World per process, made by the test
// main (MPI is initialised even without a launcher, as a job of one rank).
// Tests run under `mpirun -np N` do their collectives before asserting, so a
// failure on one rank never leaves the others waiting.
#pragma once

#include "dist/comm.h"

namespace poseidon::testing {

const dist::World& test_world();

}  // namespace poseidon::testing
