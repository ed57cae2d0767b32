// Element-wise activations (sigmoid, tanh, gelu, leaky_relu): y = f(x) for
// every element, and backward adds f'(x) * dy into the input gradient. Each
// type's arithmetic is a small struct in layers/<type>.h, callable on the
// host and in kernels:
//   Math(config)                   reads and checks the type's keys
//   float forward(float x)         f(x)
//   float slope(float x, float y)  f'(x), given y = f(x)
//   static constexpr int64_t flops per element
// ActivationLayer<Math> runs it on the CPU (its loops in
// activation_loops.h); ActivationCudaLayer<Math> (activation_cuda.cuh) in one
// kernel each way on the GPU.
#pragma once

#include "core/layer.h"

namespace poseidon {

template <class Math>
class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(const ConfigNode& config) : Layer(config), math_(config) {}

  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }

  // Defined in activation_loops.h, instantiated by each type's .cpp.
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;

  int64_t forward_flops(const std::vector<Shape>& in) const override { return Math::flops * shape_numel(in[0]); }

 protected:
  Math math_;
};

}  // namespace poseidon
