// Fully connected (PyTorch's Linear): Y = X W^T + b with weight [out, in] and
// bias [out]. An input [N, ...] is read as [N, prod(...)], so a conv or pool
// output feeds it without an explicit flatten.
//   dW = dY^T X,  db = column sums of dY,  dX += dY W.
// Declared here so that the GPU implementation (fc.cu) can take over forward
// and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class FcLayer : public Layer {
 public:
  explicit FcLayer(const ConfigNode& c);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return 2 * shape_numel(in[0]) * num_output_; }

 protected:
  int64_t num_output_ = 0;
  bool has_bias_ = true;
  int64_t batch_ = 0, features_ = 0;  // the input read as [batch_, features_]
};

}  // namespace poseidon
