// Eltwise: the element-wise product or maximum of two or more inputs of
// equal shape (Caffe's Eltwise PROD and MAX; weighted sums are the `sum`
// layer).
//   prod: y = x_0 * x_1 * ...;  dx_k += dy * (product of the other inputs)
//   max:  y = max_k x_k;        dx_k += dy where input k holds the maximum,
//         the first such input on ties (the others get nothing)
// Backward recomputes from the inputs, so no mask is kept. Declared here so
// that the GPU implementation (eltwise.cu) can take over forward and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class EltwiseLayer : public Layer {
 public:
  explicit EltwiseLayer(const ConfigNode& config);

  std::pair<int, int> input_count() const override { return {2, -1}; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override {
    return static_cast<int64_t>(in.size() - 1) * shape_numel(in[0]);
  }

 protected:
  bool max_;  // operation: max, else prod
};

}  // namespace poseidon
