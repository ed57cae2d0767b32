// PReLU on the CPU (see prelu.h).
#include "layers/prelu.h"

#include "core/registry.h"

namespace poseidon {

PreluLayer::PreluLayer(const ConfigNode& config) : Layer(config), shared_(config.get_bool("channel_shared", false)) {}

PreluLayer::Extent PreluLayer::extent(const Tensor& x) const {
  const int64_t batch = x.ndim() > 0 ? x.dim(0) : 1;
  const int64_t per_example = batch ? x.numel() / batch : 0;
  if (shared_) return {batch, 1, per_example};
  const int64_t channels = x.dim(1);
  return {batch, channels, channels ? per_example / channels : 0};
}

std::vector<Shape> PreluLayer::reshape(const std::vector<Shape>& in) {
  const Shape& s = in[0];
  if (!shared_ && s.size() < 2)
    fail("input must be [N, C] or [N, C, ...] for one slope per channel (dimension 1), got " + shape_str(s) +
         "; channel_shared: true takes any shape");
  declare_param("weight", {shared_ ? 1 : s[1]}, ParamInit{.type = "constant", .value = 0.25f});
  return {s};
}

void PreluLayer::forward(LayerIO& io, RunContext&) {
  const Extent e = extent(*io.in[0]);
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const float* a = param(0).value.data();
#pragma omp parallel for collapse(2) if (io.in[0]->numel() > 32768)
  for (int64_t n = 0; n < e.batch; ++n)
    for (int64_t c = 0; c < e.channels; ++c) {
      const int64_t off = (n * e.channels + c) * e.spatial;
      const float slope = a[c];
#pragma omp simd
      for (int64_t s = off; s < off + e.spatial; ++s) y[s] = x[s] > 0.f ? x[s] : slope * x[s];
    }
}

void PreluLayer::backward(LayerIO& io, RunContext&) {
  const Extent e = extent(*io.in[0]);
  const int64_t numel = io.in[0]->numel();
  const float* x = io.in[0]->data();
  const float* dy = io.out_grad[0]->data();
  const float* a = param(0).value.data();
  if (io.in_grad[0]) {
    float* dx = io.in_grad[0]->data();
#pragma omp parallel for collapse(2) if (numel > 32768)
    for (int64_t n = 0; n < e.batch; ++n)
      for (int64_t c = 0; c < e.channels; ++c) {
        const int64_t off = (n * e.channels + c) * e.spatial;
        const float slope = a[c];
#pragma omp simd
        for (int64_t s = off; s < off + e.spatial; ++s) dx[s] += x[s] > 0.f ? dy[s] : slope * dy[s];
      }
  }
  // Per slope, a sum in double over its values: threads split the channels,
  // or the examples when one slope is shared.
  float* da = param(0).grad.data();
  const bool by_channel = e.channels > 1;
#pragma omp parallel for if (by_channel && numel > 32768)
  for (int64_t c = 0; c < e.channels; ++c) {
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) if (!by_channel && numel > 32768)
    for (int64_t n = 0; n < e.batch; ++n) {
      const int64_t off = (n * e.channels + c) * e.spatial;
      for (int64_t s = off; s < off + e.spatial; ++s)
        if (x[s] <= 0.f) sum += double(x[s]) * dy[s];
    }
    da[c] = static_cast<float>(sum);
  }
}

POSEIDON_REGISTER_LAYER(PreluLayer, "prelu", "parametric ReLU with a learnable negative slope (PyTorch's nn.PReLU)",
                        {{"channel_shared", "bool", "false",
                          "one slope for the whole input instead of one per channel"},
                         {"weight_init", "init", "constant 0.25", "initial slopes, as for any weight"},
                         {"lr_mult", "float", "1", "learning-rate multiplier of the slopes"},
                         {"decay_mult", "float", "1", "weight-decay multiplier of the slopes"}});

}  // namespace poseidon
