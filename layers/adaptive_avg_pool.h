// Adaptive average pooling over NCHW input with the semantics of PyTorch's
// AdaptiveAvgPool2d: output cell o of a dimension of size I pooled to O
// averages the inputs [floor(o * I / O), ceil((o + 1) * I / O)). Windows may
// overlap, and an input smaller than the output is replicated. VGG pools its
// features to 7x7 this way, so its classifier keeps its size whatever the
// input size. Declared here so that the GPU implementation
// (adaptive_avg_pool.cu) can take over forward and backward.
#pragma once

#include <array>
#include <cstdint>

#include "core/layer.h"

namespace poseidon {

class AdaptiveAvgPoolLayer : public Layer {
 public:
  explicit AdaptiveAvgPoolLayer(const ConfigNode& c);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override;

  struct Window {
    int64_t begin, end;
  };

 protected:
  std::array<int64_t, 2> out_;  // output height and width
  Shape in_shape_;

 private:
  std::vector<Window> rows_, cols_;
  // Where every window holds one input (an output size a multiple of the
  // input's in both dimensions: VGG's 1x1 or 7x7 features pooled to 7x7), the offset
  // in its plane of each output cell's input, so that forward copies and
  // backward adds without the windows' loops; empty otherwise.
  std::vector<int64_t> single_taps_;
};

}  // namespace poseidon
