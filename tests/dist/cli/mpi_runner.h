// Runs `mpirun -np N poseidon ...` from the MPI CLI tests and captures its
// exit status and output.
#pragma once

#include <string>
#include <vector>

#include "tools/cli_runner.h"

namespace poseidon::testing {

inline CliResult run_mpi(int ranks, const std::string& args) {
  return run_captured(std::string(POSEIDON_MPIEXEC) + " -np " + std::to_string(ranks) + " " + POSEIDON_BINARY + " " +
                      args);
}

// One rank per entry of `environments`, each with its own variable set
// ("NAME=value"), all running `poseidon <args>`.
inline CliResult run_mpi_each(const std::vector<std::string>& environments, const std::string& args) {
  std::string cmd = POSEIDON_MPIEXEC;
  for (size_t r = 0; r < environments.size(); ++r)
    cmd += std::string(r ? " :" : "") + " -np 1 -x " + environments[r] + " " + POSEIDON_BINARY + " " + args;
  return run_captured(cmd);
}

}  // namespace poseidon::testing
