// Softmax along one axis (torch.softmax(x, dim=axis)), stabilised by
// subtracting the maximum. Backward: dx += y * (dy - sum_axis(dy * y)).
// Declared here so that the GPU implementation (softmax.cu) can take over
// forward and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class SoftmaxLayer : public Layer {
 public:
  explicit SoftmaxLayer(const ConfigNode& config) : Layer(config), axis_(config.get_int("axis", 1)) {}

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return 4 * shape_numel(in[0]); }

 protected:
  int64_t axis_;  // as configured; negative counts from the end
  // The input read as [outer_, size_, inner_] with the axis in the middle.
  int64_t outer_ = 1, size_ = 1, inner_ = 1;

 private:
  // Per (outer, inner) position; backward reuses sum_ for sum_axis(dy * y).
  std::vector<float> max_, sum_;
};

}  // namespace poseidon
