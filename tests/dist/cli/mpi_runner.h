// Runs `mpirun -np N poseidon ...` from the MPI CLI tests and captures its
// exit status and output.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/cli_runner.h"

namespace poseidon::testing {

inline CliResult run_mpi(int ranks, const std::string& args) {
  TempDir tmp;
  const std::string cmd = std::string(POSEIDON_MPIEXEC) + " -np " + std::to_string(ranks) + " " + POSEIDON_BINARY +
                          " " + args + " >" + tmp.file("out") + " 2>" + tmp.file("err") + " </dev/null";
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  std::stringstream o, e;
  o << std::ifstream(tmp.file("out")).rdbuf();
  e << std::ifstream(tmp.file("err")).rdbuf();
  r.out = o.str();
  r.err = e.str();
  return r;
}

}  // namespace poseidon::testing
