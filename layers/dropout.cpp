// Dropout on the CPU (see dropout.h).
#include "layers/dropout.h"

#include "core/bf16.h"
#include "core/registry.h"
#include "layers/dropout_mask.h"

namespace poseidon {

DropoutLayer::DropoutLayer(const ConfigNode& config) : Layer(config), ratio_(config.get_double("ratio", 0.5)) {
  if (!(ratio_ >= 0.0 && ratio_ < 1.0)) fail("ratio must be in [0, 1), got " + std::to_string(ratio_), "ratio");
}

std::vector<Shape> DropoutLayer::reshape(const std::vector<Shape>& in) {
  mask_.resize(in[0]);
  return {in[0]};
}

uint64_t DropoutLayer::draw_seed(RunContext& ctx) {
  POSEIDON_CHECK(ctx.rng) << "dropout '" << name() << "' runs in training without an RNG";
  // One draw of the run's generator per forward; the elements' bits come
  // from it by a counter (dropout_mask.h), in parallel: the forward of a
  // 32x4096 dropout took a quarter of its time with a draw each
  // (docs/BENCHMARK_HISTORY.md).
  return (*ctx.rng)();
}

void DropoutLayer::forward(LayerIO& io, RunContext& ctx) {
  const bool bf16 = io.in[0]->dtype() == DType::bf16;
  const int64_t n = io.in[0]->numel();
  masked_ = ctx.phase == Phase::train;
  if (!masked_) {
    io.out[0]->copy_from(*io.in[0]);
    return;
  }
  const uint64_t seed = draw_seed(ctx);
  const uint64_t threshold = dropout_mask::drop_threshold(ratio_);
  const float scale = mask_scale();
  float* mask = mask_.data();
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) mask[i] = dropout_mask::element(seed, static_cast<uint64_t>(i), threshold, scale);
  if (bf16) {  // the product in float32, rounded once (core/blob_types.h)
    const uint16_t* x = io.in[0]->bf16_data();
    uint16_t* y = io.out[0]->bf16_data();
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] = to_bf16(from_bf16(x[i]) * mask[i]);
    return;
  }
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
}

void DropoutLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  if (io.in_grad[0]->dtype() == DType::bf16) return backward_bf16(io);
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

void DropoutLayer::backward_bf16(LayerIO& io) const {
  const uint16_t* dy = io.out_grad[0]->bf16_data();
  uint16_t* dx = io.in_grad[0]->bf16_data();
  const int64_t n = io.out_grad[0]->numel();
  if (!masked_) {
    add_rounded_into_bf16(dy, dx, n);
    return;
  }
  const float* mask = mask_.data();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dx[i] = to_bf16(from_bf16(dx[i]) + from_bf16(dy[i]) * mask[i]);
}

POSEIDON_REGISTER_LAYER(DropoutLayer, "dropout",
                        "inverted dropout: zeroes elements with probability ratio in training, identity at test",
                        {{"ratio", "float", "0.5", "probability of zeroing an element, in [0, 1)"}});

}  // namespace poseidon
