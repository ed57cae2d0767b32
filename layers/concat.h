// Concat: joins two or more inputs along one axis (torch.cat); all other
// dimensions must agree. Backward hands each input its slice of the gradient.
// Declared here so that the GPU implementation (concat.cu) can take over
// forward and backward. On the CPU it joins bfloat16 blobs as they are where
// every input is one (core/blob_types.h).
#pragma once

#include "core/blob_types.h"
#include "core/layer.h"

namespace poseidon {

class ConcatLayer : public Layer, public BlobTypes {
 public:
  explicit ConcatLayer(const ConfigNode& config) : Layer(config), axis_(config.get_int("axis", 1)) {}

  std::pair<int, int> input_count() const override { return {2, -1}; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  // Backward writes an input gradient that holds nothing yet rather than
  // adding to it (LayerIO::in_grad_unset).
  bool writes_input_grads() const override { return true; }
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }

 protected:
  int64_t axis_;            // as configured, possibly negative
  int64_t axis_index_ = 0;  // resolved against the input rank
  int64_t outer_ = 1;       // product of the dimensions before the axis
};

}  // namespace poseidon
