// The small training run that the CLI's bit-for-bit tests share (late reads,
// CUDA graph replay): a 28x28 net with conv, batch norm, ReLU, pooling, fc
// and dropout, so that running statistics and the RNG are part of what must
// match, on 40 random IDX images; and the comparison of two checkpoints
// tensor by tensor, bit for bit.
#pragma once

#include <string>

#include "tools/cli_runner.h"

namespace poseidon::testing {

// Writes the IDX data set, model.yaml (the net, then `extra_layers`) and
// config.yaml (seed, one thread, the training data at batch 6 shuffled, then
// `config_tail`) into `d`; returns config.yaml's path.
std::string write_tiny_bn_run(const TempDir& d, int seed, const std::string& config_tail,
                              const std::string& extra_layers = "");

// Two checkpoints with the same metadata, batch norm's running statistics
// among their tensors, and every tensor bit for bit equal.
void expect_same_checkpoint(const std::string& a_path, const std::string& b_path);

}  // namespace poseidon::testing
