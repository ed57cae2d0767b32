// Sum: element-wise weighted sum of two or more inputs of equal shape,
// y = sum_k coefficients[k] * x_k (residual connections, Caffe's Eltwise SUM).
// Declared here so that the GPU implementation (sum.cu) can take over forward
// and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class SumLayer : public Layer {
 public:
  explicit SumLayer(const ConfigNode& config);

  std::pair<int, int> input_count() const override { return {2, -1}; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override {
    return 2 * static_cast<int64_t>(in.size()) * shape_numel(in[0]);
  }

 protected:
  std::vector<float> coefficients_;  // one per input
};

}  // namespace poseidon
