// bf16 on a CPU without bfloat16 kernels for a layer (before AVX-512, or an
// engine other than oneDNN's): the layer's float32 kernels multiply its
// operands rounded to bfloat16, which is what a bfloat16 kernel with float32
// accumulation multiplies, so `precision: bf16` computes with bf16's numbers
// on every CPU. These are the rounded input and weight, copied in forward
// and read again by backward, for the engines that read their operands as
// they are (the Winograd engine rounds them as it reads them); the output
// gradient is rounded in place by the layer (round_to_bf16), as no layer
// reads it after the one it feeds.
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

class RoundedOperands {
 public:
  // Room for an input of `input` floats and a weight of `weight`; none,
  // and the memory freed, where `active` is false.
  void prepare(bool active, int64_t input, int64_t weight);
  bool active() const { return active_; }
  // Forward: rounds x and w into the copies.
  void round(const float* x, int64_t x_size, const float* w);
  // The copies of the last round(), which backward reads.
  const float* input() const { return input_.data(); }
  const float* weight() const { return weight_.data(); }

 private:
  bool active_ = false;
  std::vector<float> input_, weight_;
};

}  // namespace poseidon
