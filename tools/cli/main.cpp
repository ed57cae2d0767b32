// Entry point of the poseidon binary.
#include "tools/cli/app.h"

int main(int argc, char** argv) { return poseidon::run_cli(argc, argv); }
