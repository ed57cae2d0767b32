// ReLU: y = max(x, 0); dy/dx = 1 where x > 0.
#include "core/registry.h"

namespace poseidon {
namespace {

class ReluLayer : public Layer {
 public:
  using Layer::Layer;

  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }

  void forward(LayerIO& io, RunContext&) override {
    const float* x = io.in[0]->data();
    float* y = io.out[0]->data();
    const int64_t n = io.in[0]->numel();
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  }

  void backward(LayerIO& io, RunContext&) override {
    if (!io.in_grad[0]) return;
    const float* x = io.in[0]->data();
    const float* dy = io.out_grad[0]->data();
    float* dx = io.in_grad[0]->data();
    const int64_t n = io.in[0]->numel();
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) dx[i] += x[i] > 0.f ? dy[i] : 0.f;
  }

  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }
};

}  // namespace

POSEIDON_REGISTER_LAYER(ReluLayer, "relu", "rectified linear unit, max(x, 0)", {});

}  // namespace poseidon
