// Dropout on the CPU (see dropout.h).
#include "layers/dropout.h"

#include "core/registry.h"

namespace poseidon {

DropoutLayer::DropoutLayer(const ConfigNode& config) : Layer(config), ratio_(config.get_double("ratio", 0.5)) {
  if (!(ratio_ >= 0.0 && ratio_ < 1.0)) fail("ratio must be in [0, 1), got " + std::to_string(ratio_), "ratio");
}

std::vector<Shape> DropoutLayer::reshape(const std::vector<Shape>& in) {
  mask_.resize(in[0]);
  return {in[0]};
}

void DropoutLayer::draw_mask(RunContext& ctx) {
  POSEIDON_CHECK(ctx.rng) << "dropout '" << name() << "' runs in training without an RNG";
  // The draws are sequential so that the mask does not depend on the thread count.
  const float scale = static_cast<float>(1.0 / (1.0 - ratio_));
  float* mask = mask_.data();
  const int64_t n = mask_.numel();
  std::mt19937_64& rng = *ctx.rng;
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // uniform in [0, 1)
    mask[i] = u < ratio_ ? 0.f : scale;
  }
}

void DropoutLayer::forward(LayerIO& io, RunContext& ctx) {
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const int64_t n = io.in[0]->numel();
  masked_ = ctx.phase == Phase::train;
  if (!masked_) {
    io.out[0]->copy_from(*io.in[0]);
    return;
  }
  draw_mask(ctx);
  const float* mask = mask_.data();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
}

void DropoutLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t n = io.out_grad[0]->numel();
  if (!masked_) {
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) dx[i] += dy[i];
    return;
  }
  const float* mask = mask_.data();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * mask[i];
}

POSEIDON_REGISTER_LAYER(DropoutLayer, "dropout",
                        "inverted dropout: zeroes elements with probability ratio in training, identity at test",
                        {{"ratio", "float", "0.5", "probability of zeroing an element, in [0, 1)"}});

}  // namespace poseidon
