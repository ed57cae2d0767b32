// bf16 on a CPU without bfloat16 kernels for a layer (before AVX-512, or an
// engine other than oneDNN's): the layer's float32 kernels multiply its
// operands rounded to bfloat16, which is what a bfloat16 kernel with float32
// accumulation multiplies, so `precision: bf16` computes with bf16's numbers
// on every CPU. These are the rounded input, copied in forward and read
// again by backward, and the weight's rounded copy, which the Solver's
// update writes once per step (core/rounded_weight.h), for the engines that
// read their operands as they are (the Winograd engine rounds them as it
// reads them); the output gradient is rounded in place by the layer
// (round_to_bf16), as no layer reads it after the one it feeds.
#pragma once

#include <cstdint>
#include <vector>

#include "core/layer.h"

namespace poseidon {

class RoundedOperands {
 public:
  // Room for an input of `input` floats; none, and the memory freed, where
  // `active` is false.
  void prepare(bool active, int64_t input);
  bool active() const { return active_; }
  // Forward: rounds x into the copy and takes the weight's rounded copy.
  void round(const float* x, int64_t x_size, Param& weight);
  // The operands of the last round(), which backward reads.
  const float* input() const { return input_.data(); }
  const float* weight() const { return weight_; }

 private:
  bool active_ = false;
  std::vector<float> input_;
  const float* weight_ = nullptr;
};

}  // namespace poseidon
