// OpenBLAS kernel selection and the OpenMP wait policy, set before the
// libraries load (see cpu_tuning.h).
#include "tools/cli/cpu_tuning.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

extern "C" char* openblas_get_corename(void);

namespace poseidon {

namespace {
// Spins of a thread waiting at the end of a parallel region before it
// sleeps, where the process runs alone on its host (see cpu_tuning.h).
constexpr const char* kShortSpin = "3000";

const char* best_core_type() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Whether OPENBLAS_CORETYPE was set here: only when OpenBLAS fell back to
// its generic kernels on a CPU that has better ones.
bool choose_blas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE")) return false;  // the user's choice, or already restarted
  const char* detected = openblas_get_corename();
  if (!detected || (std::strcmp(detected, "Prescott") != 0 && std::strcmp(detected, "Core2") != 0)) return false;
  const char* core = best_core_type();
  if (!core) return false;
  setenv("OPENBLAS_CORETYPE", core, 1);
  return true;
}

// How many ranks of an MPI job run on this host, read from the variables
// that Open MPI, MPICH and Slurm set before the program starts; 1 outside one.
long ranks_on_this_host() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* value = std::getenv(name)) {
      const long n = std::strtol(value, nullptr, 10);
      if (n > 0) return n;
    }
  return 1;
}

bool choose_wait_policy() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return false;  // the user's choice
  if (ranks_on_this_host() > 1)
    setenv("OMP_WAIT_POLICY", "passive", 1);
  else
    setenv("GOMP_SPINCOUNT", kShortSpin, 1);
  return true;
}
}  // namespace

void apply_cpu_settings(char** argv) {
  const bool blas = choose_blas_kernels();
  const bool wait = choose_wait_policy();
  if (blas || wait) execv("/proc/self/exe", argv);  // returns only on failure: carry on with the defaults
}

}  // namespace poseidon
