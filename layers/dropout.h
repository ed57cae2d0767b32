// Dropout: in training each element is zeroed with probability `ratio` and the
// survivors are scaled by 1 / (1 - ratio) (inverted dropout, as PyTorch), so
// the test phase is the identity. The mask comes from one draw of the run's
// RNG per forward, spread over the elements by integer arithmetic alone
// (layers/dropout_mask.h), so a seed reproduces it on any platform, with any
// thread count, and on the GPU (dropout.cu), which computes the same
// function of the same draw on the device. On the CPU it reads and writes
// bfloat16 blobs (core/blob_types.h), the product taken in float32.
#pragma once

#include "core/blob_types.h"
#include "core/layer.h"

namespace poseidon {

class DropoutLayer : public Layer, public BlobTypes {
 public:
  explicit DropoutLayer(const ConfigNode& config);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }

 protected:
  // The one draw from ctx.rng that a training forward's mask is made from.
  uint64_t draw_seed(RunContext& ctx);
  // What survivors are multiplied by: 1 / (1 - ratio).
  float mask_scale() const { return static_cast<float>(1.0 / (1.0 - ratio_)); }

  void backward_bf16(LayerIO& io) const;

  double ratio_;
  Tensor mask_;          // on the CPU: 0 or 1 / (1 - ratio) per element, from the last training forward
  bool masked_ = false;  // whether the last forward applied the mask
};

}  // namespace poseidon
