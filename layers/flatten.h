// Flatten: merges the dimensions from `axis` on into one (nn.Flatten), e.g.
// [N, C, H, W] -> [N, C*H*W] between convolutional and fully connected layers.
// Declared here so that the GPU implementation (flatten.cu) can take over
// backward. On the CPU it moves bfloat16 blobs as they are
// (core/blob_types.h).
#pragma once

#include "core/blob_types.h"
#include "core/layer.h"

namespace poseidon {

class FlattenLayer : public Layer, public BlobTypes {
 public:
  explicit FlattenLayer(const ConfigNode& config) : Layer(config), axis_(config.get_int("axis", 1)) {}

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  // The Net gives every blob its own memory, so flattening is a copy (on any
  // device: Tensor::copy_from queues a GPU copy on the compute stream).
  void forward(LayerIO& io, RunContext&) override { io.out[0]->copy_from(*io.in[0]); }
  void backward(LayerIO& io, RunContext& ctx) override;
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }

 private:
  int64_t axis_;  // first merged dimension; negative counts from the end
};

}  // namespace poseidon
