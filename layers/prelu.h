// PReLU, PyTorch's nn.PReLU: y = x for x > 0, a * x otherwise, with a
// learnable slope `weight` (PyTorch's name and initial value 0.25): one per
// channel (dimension 1 of [N, C, ...]) or, with channel_shared, one for the
// whole input. Backward adds dy or a * dy into the input gradient and
// overwrites the slope's gradient, the sum of x * dy over the inputs where
// x <= 0. Declared here so that the GPU implementation (prelu.cu) can take
// over forward and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class PreluLayer : public Layer {
 public:
  explicit PreluLayer(const ConfigNode& config);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }

 protected:
  // The input as the slopes see it, [batch, channels, spatial]: a shared
  // slope sees one channel holding every value of an example.
  struct Extent {
    int64_t batch, channels, spatial;
  };
  Extent extent(const Tensor& x) const;

  bool shared_;
};

}  // namespace poseidon
