// Entry point of the poseidon binary.
#include "tools/cli/app.h"
#include "tools/cli/cpu_tuning.h"

int main(int argc, char** argv) {
  poseidon::ensure_blas_kernels(argv);
  return poseidon::run_cli(argc, argv);
}
