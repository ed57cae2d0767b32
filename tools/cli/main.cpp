// Entry point of the poseidon binary.
#include "tools/cli/app.h"
#include "tools/cli/cpu_tuning.h"

int main(int argc, char** argv) {
  poseidon::apply_cpu_settings(argv);
  return poseidon::run_cli(argc, argv);
}
