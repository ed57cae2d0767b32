// Local response normalisation across channels (Caffe's LRN with
// ACROSS_CHANNELS, as in AlexNet), with the semantics of PyTorch's
// nn.LocalResponseNorm on [N, C, ...] input:
//   y = x / s^beta,  s = k + alpha / n * (sum of x^2 over the window)
// where n = local_size and channel c's window is [c - n/2, c + (n-1)/2],
// clipped to the channels but always divided by n (PyTorch averages over
// zero padding; for odd n this is Caffe's centred window). Backward:
//   dx_j += dy_j / s_j^beta - 2 alpha beta / n * x_j * sum_i dy_i y_i / s_i
// over the channels i whose window holds j. Declared here so that the GPU
// implementation (lrn.cu) shares the keys and checks.
#pragma once

#include "core/layer.h"

namespace poseidon {

class LrnLayer : public Layer {
 public:
  explicit LrnLayer(const ConfigNode& config);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return (2 * size_ + 4) * shape_numel(in[0]); }

 protected:
  struct Extent {
    int64_t batch, channels, spatial;
  };
  static Extent extent(const Tensor& x);
  // Channels before and after c in its window.
  int64_t before() const { return size_ / 2; }
  int64_t after() const { return (size_ - 1) / 2; }
  // scale_ shaped like `x` on `device`, reallocated only when either changes.
  void keep_scale(const Tensor& x, const Device& device);

  int64_t size_;
  float alpha_, beta_, k_;
  Tensor scale_;  // s of the last forward, per element

 private:
  Tensor ratio_;  // dy * y / s during backward (CPU)
};

}  // namespace poseidon
