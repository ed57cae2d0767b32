// ReLU: y = max(x, 0); dy/dx = 1 where x > 0. Declared here so that the GPU
// implementation (relu.cu) can take over forward and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class ReluLayer : public Layer {
 public:
  using Layer::Layer;

  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }
};

}  // namespace poseidon
