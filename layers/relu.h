// ReLU: y = max(x, 0); dy/dx = 1 where x > 0. Declared here so that the GPU
// implementation (relu.cu) can take over forward and backward. On the CPU
// it reads and writes bfloat16 blobs as they are (core/blob_types.h): a
// selection rounds nothing.
#pragma once

#include "core/blob_types.h"
#include "core/layer.h"

namespace poseidon {

class ReluLayer : public Layer, public BlobTypes {
 public:
  using Layer::Layer;

  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }
};

}  // namespace poseidon
