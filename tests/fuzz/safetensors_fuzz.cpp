// Fuzz target: a checkpoint as `poseidon train --resume` reads it: the
// safetensors header and data (every dtype's conversion), the match against
// the model's parameters and the solver state, and the training metadata
// (iteration, loader position, RNG state) of the Trainer.
#include "fuzz_support.h"
#include "tools/cli/trainer.h"

namespace {
poseidon::TrainConfig* config = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace poseidon;
  config = new TrainConfig(
      TrainConfig::load(fuzz::input_path("tiny_config.yaml"), {"train.output_dir=" + fuzz::scratch_dir() + "/runs"}));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size > fuzz::kMaxInputBytes) return 0;
  const std::string path = fuzz::write_file("checkpoint.safetensors", data, size);
  fuzz::accept_or_reject([&] {
    TrainOptions options;
    options.resume = path;
    options.quiet = true;
    Trainer trainer(*config, options);
  });
  return 0;
}
