// swish: y = x * sigmoid(beta * x), with beta learned (one scalar per layer),
// as a plug-in: the whole of what an outside project writes for a layer.
#include <cmath>

#include "core/plugin.h"
#include "core/registry.h"

namespace {

using namespace poseidon;

class SwishLayer : public Layer {
 public:
  explicit SwishLayer(const ConfigNode& config) : Layer(config) {}

  std::vector<Shape> reshape(const std::vector<Shape>& in) override {
    ParamInit one;
    one.type = "constant";
    one.value = 1.f;
    declare_param("beta", {1}, one);
    return {in[0]};
  }

  void forward(LayerIO& io, RunContext&) override {
    const float beta = param(0).value[0];
    const Tensor& x = *io.in[0];
    Tensor& y = *io.out[0];
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = x[i] * sigmoid(beta * x[i]);
  }

  // dy/dx = s + beta x s (1 - s), dy/dbeta = x^2 s (1 - s), with s = sigmoid(beta x).
  // The input gradient is added to (another layer may have written there
  // first); the parameter gradient is written.
  void backward(LayerIO& io, RunContext&) override {
    const float beta = param(0).value[0];
    const Tensor& x = *io.in[0];
    const Tensor& dy = *io.out_grad[0];
    double dbeta = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float s = sigmoid(beta * x[i]);
      if (io.in_grad[0]) (*io.in_grad[0])[i] += dy[i] * (s + beta * x[i] * s * (1 - s));
      dbeta += double(dy[i]) * x[i] * x[i] * s * (1 - s);
    }
    if (io.writes_param_grad(0)) param(0).grad[0] = static_cast<float>(dbeta);
  }

  int64_t forward_flops(const std::vector<Shape>& in) const override { return 4 * shape_numel(in[0]); }

 private:
  static float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }
};

}  // namespace

POSEIDON_REGISTER_LAYER(SwishLayer, "swish", "x * sigmoid(beta * x), beta learned (plug-in example)",
                        {{"beta_init", "init", "constant 1", "initial beta, as weight_init"},
                         {"lr_mult", "float", "1", "learning-rate multiplier of beta"},
                         {"decay_mult", "float", "1", "weight-decay multiplier of beta"}});
POSEIDON_PLUGIN()
