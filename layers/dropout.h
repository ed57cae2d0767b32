// Dropout: in training each element is zeroed with probability `ratio` and the
// survivors are scaled by 1 / (1 - ratio) (inverted dropout, as PyTorch), so
// the test phase is the identity. The mask comes from one draw of the run's
// RNG per forward, spread over the elements by integer arithmetic alone, so
// a seed reproduces it on any platform and with any thread count. Declared
// here so that the GPU implementation (dropout.cu) applies the same mask.
#pragma once

#include "core/layer.h"

namespace poseidon {

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(const ConfigNode& config);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }

 protected:
  // Fills mask_ (on the host) for one training forward from ctx.rng.
  void draw_mask(RunContext& ctx);

  double ratio_;
  Tensor mask_;          // 0 or 1 / (1 - ratio) per element, from the last training forward
  bool masked_ = false;  // whether the last forward applied the mask
};

}  // namespace poseidon
