// Flatten: merges the dimensions from `axis` on into one (nn.Flatten), e.g.
// [N, C, H, W] -> [N, C*H*W] between convolutional and fully connected layers.
// Declared here so that the GPU implementation (flatten.cu) can take over
// backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class FlattenLayer : public Layer {
 public:
  explicit FlattenLayer(const ConfigNode& config) : Layer(config), axis_(config.get_int("axis", 1)) {}

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  // The Net gives every blob its own memory, so flattening is a copy (on any
  // device: Tensor::copy_from queues a GPU copy on the compute stream).
  void forward(LayerIO& io, RunContext&) override { io.out[0]->copy_from(*io.in[0]); }
  void backward(LayerIO& io, RunContext& ctx) override;

 private:
  int64_t axis_;  // first merged dimension; negative counts from the end
};

}  // namespace poseidon
