// The MPI job the dist tests run in: one World per process, made by the test
// main (MPI is initialised even without a launcher, as a job of one rank).
// Tests run under `mpirun -np N` do their collectives before asserting, so a
// failure on one rank never leaves the others waiting.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "dist/runtime/comm.h"

namespace poseidon::testing {

const dist::World& test_world();

// A path every rank can read, named by rank 0.
inline std::string shared_path(const std::string& name) {
  int64_t pid = getpid();
  POSEIDON_MPI(MPI_Bcast(&pid, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(pid) + ".safetensors")).string();
}

}  // namespace poseidon::testing
