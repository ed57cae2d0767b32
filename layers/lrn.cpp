// Local response normalisation on the CPU (see lrn.h): each (example,
// channel) plane sums the squares of its window's planes, then divides.
#include "layers/lrn.h"

#include <algorithm>
#include <cmath>

#include "core/registry.h"

namespace poseidon {

LrnLayer::LrnLayer(const ConfigNode& config)
    : Layer(config),
      size_(config.get_int("local_size", 5)),
      alpha_(static_cast<float>(config.get_double("alpha", 1e-4))),
      beta_(static_cast<float>(config.get_double("beta", 0.75))),
      k_(static_cast<float>(config.get_double("k", 1.0))) {
  if (size_ < 1) fail("local_size must be at least 1, got " + std::to_string(size_), "local_size");
  // s >= k must stay positive: it is raised to a fractional power and divides.
  if (!(k_ > 0.f)) fail("k must be positive, got " + std::to_string(k_), "k");
  if (!(alpha_ >= 0.f)) fail("alpha must not be negative, got " + std::to_string(alpha_), "alpha");
}

LrnLayer::Extent LrnLayer::extent(const Tensor& x) {
  Extent e{x.dim(0), x.dim(1), 1};
  for (int i = 2; i < x.ndim(); ++i) e.spatial *= x.dim(i);
  return e;
}

std::vector<Shape> LrnLayer::reshape(const std::vector<Shape>& in) {
  if (in[0].size() < 2) fail("input must be [N, C] or [N, C, ...] (channels on dimension 1), got " + shape_str(in[0]));
  return {in[0]};
}

void LrnLayer::keep_scale(const Tensor& x, const Device& device) {
  if (!scale_.defined() || !(scale_.device() == device)) scale_ = Tensor::on(device);
  scale_.resize(x.shape());
}

void LrnLayer::forward(LayerIO& io, RunContext& ctx) {
  const Tensor& input = *io.in[0];
  const Extent e = extent(input);
  keep_scale(input, ctx.device);
  const float* x = input.data();
  float* y = io.out[0]->data();
  float* s = scale_.data();
  const float a = alpha_ / static_cast<float>(size_);
#pragma omp parallel for collapse(2) if (input.numel() > 32768)
  for (int64_t n = 0; n < e.batch; ++n)
    for (int64_t c = 0; c < e.channels; ++c) {
      float* sc = s + (n * e.channels + c) * e.spatial;
      std::fill(sc, sc + e.spatial, 0.f);
      const int64_t first = std::max<int64_t>(0, c - before()), last = std::min(e.channels - 1, c + after());
      for (int64_t w = first; w <= last; ++w) {
        const float* xw = x + (n * e.channels + w) * e.spatial;
#pragma omp simd
        for (int64_t i = 0; i < e.spatial; ++i) sc[i] += xw[i] * xw[i];
      }
      const float* xc = x + (n * e.channels + c) * e.spatial;
      float* yc = y + (n * e.channels + c) * e.spatial;
      for (int64_t i = 0; i < e.spatial; ++i) {
        sc[i] = k_ + a * sc[i];
        yc[i] = xc[i] / std::pow(sc[i], beta_);
      }
    }
}

void LrnLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const Tensor& input = *io.in[0];
  const Extent e = extent(input);
  const int64_t numel = input.numel();
  const float* x = input.data();
  const float* y = io.out[0]->data();
  const float* dy = io.out_grad[0]->data();
  const float* s = scale_.data();
  float* dx = io.in_grad[0]->data();
  ratio_.resize(input.shape());
  float* r = ratio_.data();
#pragma omp parallel for simd if (numel > 32768)
  for (int64_t i = 0; i < numel; ++i) r[i] = dy[i] * y[i] / s[i];
  const float coef = 2.f * alpha_ * beta_ / static_cast<float>(size_);
#pragma omp parallel for collapse(2) if (numel > 32768)
  for (int64_t n = 0; n < e.batch; ++n)
    for (int64_t c = 0; c < e.channels; ++c) {
      const int64_t off = (n * e.channels + c) * e.spatial;
      // Channel c lies in the windows of channels c - after .. c + before.
      const int64_t first = std::max<int64_t>(0, c - after()), last = std::min(e.channels - 1, c + before());
      for (int64_t i = 0; i < e.spatial; ++i) {
        float sum = 0.f;
        for (int64_t w = first; w <= last; ++w) sum += r[(n * e.channels + w) * e.spatial + i];
        dx[off + i] += dy[off + i] / std::pow(s[off + i], beta_) - coef * x[off + i] * sum;
      }
    }
}

POSEIDON_REGISTER_LAYER(LrnLayer, "lrn",
                        "local response normalisation across channels (Caffe/AlexNet; PyTorch's LocalResponseNorm)",
                        {{"local_size", "int", "5", "channels in the window summed over, n"},
                         {"alpha", "float", "1e-4", "scale of the window's sum of squares, divided by n; not negative"},
                         {"beta", "float", "0.75", "exponent"},
                         {"k", "float", "1", "additive constant, positive"}});

}  // namespace poseidon
