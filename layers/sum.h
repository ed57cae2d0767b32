// Sum: element-wise weighted sum of two or more inputs of equal shape,
// y = sum_k coefficients[k] * x_k (residual connections, Caffe's Eltwise SUM).
// With a ReLU fused (core/relu_fusion.h) the output is max(y, 0): the residual
// add and ResNet's ReLU after it in one pass. Declared here so that the GPU
// implementation (sum.cu) can take over forward and backward. On the CPU it
// sums bfloat16 blobs in float32 and rounds once (core/blob_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/blob_types.h"
#include "core/layer.h"
#include "core/relu_fusion.h"

namespace poseidon {

class SumLayer : public Layer, public ReluFusable, public BlobTypes {
 public:
  explicit SumLayer(const ConfigNode& config);

  // The CPU kernels apply a following ReLU (core/relu_fusion.h).
  bool fuse_relu() override { return relu_fused_ = true; }

  std::pair<int, int> input_count() const override { return {2, -1}; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  // Backward writes an input gradient that holds nothing yet rather than
  // adding to it (LayerIO::in_grad_unset).
  bool writes_input_grads() const override { return true; }
  int64_t forward_flops(const std::vector<Shape>& in) const override {
    return 2 * static_cast<int64_t>(in.size()) * shape_numel(in[0]);
  }
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }

 protected:
  std::vector<float> coefficients_;  // one per input

 private:
  void forward_bf16(LayerIO& io);
  void backward_bf16(LayerIO& io) const;
  std::vector<const uint16_t*> bf16_inputs_;  // forward's inputs as bfloat16
};

}  // namespace poseidon
