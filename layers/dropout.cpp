// Dropout on the CPU (see dropout.h).
#include "layers/dropout.h"

#include <cmath>
#include <cstdint>

#include "core/registry.h"

namespace poseidon {

DropoutLayer::DropoutLayer(const ConfigNode& config) : Layer(config), ratio_(config.get_double("ratio", 0.5)) {
  if (!(ratio_ >= 0.0 && ratio_ < 1.0)) fail("ratio must be in [0, 1), got " + std::to_string(ratio_), "ratio");
}

std::vector<Shape> DropoutLayer::reshape(const std::vector<Shape>& in) {
  mask_.resize(in[0]);
  return {in[0]};
}

namespace {

// SplitMix64's output function: a bijection of 64-bit words whose outputs,
// over consecutive multiples of its increment, pass BigCrush. Element i of
// a mask is this function of the forward's seed and i alone, so the draws
// run in parallel, in any order, with any thread count, to the same mask.
uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

void DropoutLayer::draw_mask(RunContext& ctx) {
  POSEIDON_CHECK(ctx.rng) << "dropout '" << name() << "' runs in training without an RNG";
  // One draw of the run's generator per forward; the elements' bits come
  // from it by a counter (above), in parallel: the forward of a 32x4096
  // dropout took a quarter of its time with a draw each (docs/BENCHMARK_HISTORY.md).
  const uint64_t seed = (*ctx.rng)();
  // An element is dropped where its 53-bit uniform u = bits * 2^-53 is below
  // ratio, i.e. where bits < ceil(ratio * 2^53): integers only, exact.
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(ratio_ * 0x1.0p53));
  const float scale = static_cast<float>(1.0 / (1.0 - ratio_));
  float* mask = mask_.data();
  const int64_t n = mask_.numel();
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = splitmix64(seed + (static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ULL) >> 11;
    mask[i] = bits < threshold ? 0.f : scale;
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
