// OpenBLAS kernel selection for CPUs its detection does not know, and the
// OpenMP wait policy set before libgomp loads (see cpu_tuning.h).
#include "tools/cli/cpu_tuning.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern "C" char* openblas_get_corename(void);

namespace poseidon {

namespace {
const char* best_core_type() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Runs before the shared libraries' initialisers (libgomp's reads the
// environment), so only the C library's basics may be used here.
void set_wait_policy(int, char**, char**) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;  // the user's choice
  setenv("OMP_WAIT_POLICY", kDefaultWaitPolicy, 0);
}

[[gnu::used, gnu::section(".preinit_array")]] void (*wait_policy_before_libraries)(int, char**, char**) =
    set_wait_policy;
}  // namespace

void ensure_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // the user's choice, or already restarted
  const char* detected = openblas_get_corename();
  if (!detected || (std::strcmp(detected, "Prescott") != 0 && std::strcmp(detected, "Core2") != 0)) return;
  const char* core = best_core_type();
  if (!core) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the generic kernels
}

}  // namespace poseidon
