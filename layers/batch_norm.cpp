// Batch normalisation on the CPU (see batch_norm.h).
#include "layers/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "core/registry.h"
#include "layers/cpu_vector.h"

namespace poseidon {

BatchNormLayer::BatchNormLayer(const ConfigNode& config)
    : Layer(config),
      eps_(config.get_double("eps", 1e-5)),
      momentum_(config.get_double("momentum", 0.1)),
      affine_(config.get_bool("affine", true)) {
  if (!(eps_ > 0.0)) fail("eps must be positive, got " + std::to_string(eps_), "eps");
  if (!(momentum_ >= 0.0 && momentum_ <= 1.0))
    fail("momentum must be in [0, 1], got " + std::to_string(momentum_), "momentum");
}

BatchNormLayer::Extent BatchNormLayer::extent(const Tensor& x) {
  Extent e{x.dim(0), x.dim(1), 1, 0};
  for (int i = 2; i < x.ndim(); ++i) e.spatial *= x.dim(i);
  e.count = e.batch * e.spatial;
  return e;
}

void BatchNormLayer::check_batch(const Tensor& x, const Extent& e) const {
  if (e.count < 2) fail("training needs more than one value per channel, got input " + shape_str(x.shape()));
}

std::vector<Shape> BatchNormLayer::reshape(const std::vector<Shape>& in) {
  const Shape& s = in[0];
  if (s.size() < 2) fail("input must be [N, C] or [N, C, ...] (channels on dimension 1), got " + shape_str(s));
  const int64_t channels = s[1];
  if (affine_) {
    declare_param("weight", {channels}, ParamInit{.type = "constant", .value = 1.f});
    declare_param("bias", {channels}, ParamInit{.type = "constant", .value = 0.f});
  }
  declare_param("running_mean", {channels}, ParamInit{.type = "constant", .value = 0.f}, false);
  declare_param("running_var", {channels}, ParamInit{.type = "constant", .value = 1.f}, false);
  mean_.resize(channels);
  inv_std_.resize(channels);
  return {s};
}

namespace {

// One channel of an [N, C, S] tensor: batch runs of spatial values, stride
// apart. Each kernel below walks one channel.
struct Channel {
  int64_t batch, stride, spatial;
};

// Asks for row n + 1 of a channel while row n is summed: the rows are short
// (8x8 to 32x32 values) and far apart, too short for the hardware prefetcher
// to find before each ends.
inline void prefetch_next_row(const float* row, Channel ch, int64_t n) {
  if (n + 1 >= ch.batch) return;
  for (int64_t s = 0; s < ch.spatial; s += 16) __builtin_prefetch(row + ch.stride + s);
}

// The same for a row about to be written.
inline void prefetch_next_row_for_write(float* row, Channel ch, int64_t n) {
  if (n + 1 >= ch.batch) return;
  for (int64_t s = 0; s < ch.spatial; s += 16) __builtin_prefetch(row + ch.stride + s, 1);
}

// Sums of d = x - shift and of d * d over the channel in one pass, in double.
// The shift is a value of the channel, and no value lies more than
// sqrt(count) standard deviations from the mean, so squares - sum^2 / count
// cancels at most a factor count of double's precision: the variance keeps
// fp32 precision up to 1e8 values per channel, as a second, centred pass
// would give it.
POSEIDON_VECTOR_CLONES void channel_shifted_sums(const float* x, Channel ch, double shift, double& sum_out,
                                                 double& squares_out) {
  double sum = 0, squares = 0;
  for (int64_t n = 0; n < ch.batch; ++n) {
    const float* row = x + n * ch.stride;
    prefetch_next_row(row, ch, n);
#pragma omp simd reduction(+ : sum, squares)
    for (int64_t s = 0; s < ch.spatial; ++s) {
      const double d = row[s] - shift;
      sum += d;
      squares += d * d;
    }
  }
  sum_out = sum;
  squares_out = squares;
}

POSEIDON_VECTOR_CLONES void channel_affine(const float* x, float* y, Channel ch, float scale, float shift) {
  for (int64_t n = 0; n < ch.batch; ++n) {
    const float* in = x + n * ch.stride;
    float* out = y + n * ch.stride;
    prefetch_next_row_for_write(out, ch, n);
#pragma omp simd
    for (int64_t s = 0; s < ch.spatial; ++s) out[s] = in[s] * scale + shift;
  }
}

// Sums over the channel's values of dy and dy * xhat, both in one pass.
POSEIDON_VECTOR_CLONES void channel_grad_sums(const float* x, const float* dy, Channel ch, float mean, float inv_std,
                                              double& sum_dy_out, double& sum_dy_xhat_out) {
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t n = 0; n < ch.batch; ++n) {
    const float* in = x + n * ch.stride;
    const float* g = dy + n * ch.stride;
    prefetch_next_row(in, ch, n);
    prefetch_next_row(g, ch, n);
#pragma omp simd reduction(+ : sum_dy, sum_dy_xhat)
    for (int64_t s = 0; s < ch.spatial; ++s) {
      sum_dy += g[s];
      sum_dy_xhat += double(g[s]) * ((in[s] - mean) * inv_std);
    }
  }
  sum_dy_out = sum_dy;
  sum_dy_xhat_out = sum_dy_xhat;
}

// dx += g * (dy - mean_dy - xhat * mean_dy_xhat)
POSEIDON_VECTOR_CLONES void channel_input_grad(const float* x, const float* dy, float* dx, Channel ch, float mean,
                                               float inv_std, float g, float mean_dy, float mean_dy_xhat) {
  for (int64_t n = 0; n < ch.batch; ++n) {
    const float* in = x + n * ch.stride;
    const float* grad = dy + n * ch.stride;
    float* out = dx + n * ch.stride;
    prefetch_next_row_for_write(out, ch, n);
#pragma omp simd
    for (int64_t s = 0; s < ch.spatial; ++s) {
      const float xhat = (in[s] - mean) * inv_std;
      out[s] += g * (grad[s] - mean_dy - xhat * mean_dy_xhat);
    }
  }
}

// The mean and the centred sum of squares of a channel, from one pass.
void channel_stats(const float* x, Channel ch, int64_t count, double& mean, double& squares) {
  const double shift = x[0];
  double sum, shifted_squares;
  channel_shifted_sums(x, ch, shift, sum, shifted_squares);
  mean = shift + sum / count;
  squares = std::max(shifted_squares - sum * sum / count, 0.0);
}

}  // namespace

// Channel by channel: the normalisation reads the channel's values while they
// are still in cache from the pass that took its statistics, so the input
// comes from memory once.
void BatchNormLayer::forward(LayerIO& io, RunContext& ctx) {
  const Tensor& x = *io.in[0];
  const Extent e = extent(x);
  batch_stats_ = ctx.phase == Phase::train;
  if (batch_stats_) check_batch(x, e);
  const float* px = x.data();
  float* py = io.out[0]->data();
  const float* w = affine_ ? param(0).value.data() : nullptr;
  const float* b = affine_ ? param(1).value.data() : nullptr;
  float* rm = running_mean().value.data();
  float* rv = running_var().value.data();
  const double m = momentum_;
  const Channel ch{e.batch, e.channels * e.spatial, e.spatial};
#pragma omp parallel for schedule(static) if (x.numel() > 32768)
  for (int64_t c = 0; c < e.channels; ++c) {
    const float* xc = px + c * e.spatial;
    if (batch_stats_) {
      double mean, squares;
      channel_stats(xc, ch, e.count, mean, squares);
      mean_[c] = static_cast<float>(mean);
      inv_std_[c] = static_cast<float>(1.0 / std::sqrt(squares / e.count + eps_));
      rm[c] = static_cast<float>((1 - m) * rm[c] + m * mean);
      rv[c] = static_cast<float>((1 - m) * rv[c] + m * squares / (e.count - 1));
    } else {
      mean_[c] = rm[c];
      inv_std_[c] = static_cast<float>(1.0 / std::sqrt(double(rv[c]) + eps_));
    }
    const float scale = inv_std_[c] * (w ? w[c] : 1.f);
    const float shift = (b ? b[c] : 0.f) - mean_[c] * scale;
    channel_affine(xc, py + c * e.spatial, ch, scale, shift);
  }
}

// Per channel, both sums in one pass and then the input gradient, which reads
// x and dy again while they are in cache.
void BatchNormLayer::backward(LayerIO& io, RunContext&) {
  const Tensor& x = *io.in[0];
  const Extent e = extent(x);
  const float* px = x.data();
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0] ? io.in_grad[0]->data() : nullptr;
  const float* w = affine_ ? param(0).value.data() : nullptr;
  float* dw = affine_ ? param(0).grad.data() : nullptr;
  float* db = affine_ ? param(1).grad.data() : nullptr;
  const Channel ch{e.batch, e.channels * e.spatial, e.spatial};
#pragma omp parallel for schedule(static) if (x.numel() > 32768)
  for (int64_t c = 0; c < e.channels; ++c) {
    const int64_t off = c * e.spatial;
    const float mean = mean_[c], inv_std = inv_std_[c];
    double sum_dy, sum_dy_xhat;
    channel_grad_sums(px + off, dy + off, ch, mean, inv_std, sum_dy, sum_dy_xhat);
    if (dw) dw[c] = static_cast<float>(sum_dy_xhat);
    if (db) db[c] = static_cast<float>(sum_dy);
    if (!dx) continue;
    // With batch statistics the mean and variance depend on x too:
    // dx = g * (dy - mean(dy) - xhat * mean(dy * xhat)).
    const float g = inv_std * (w ? w[c] : 1.f);
    const float mean_dy = batch_stats_ ? static_cast<float>(sum_dy / e.count) : 0.f;
    const float mean_dy_xhat = batch_stats_ ? static_cast<float>(sum_dy_xhat / e.count) : 0.f;
    channel_input_grad(px + off, dy + off, dx + off, ch, mean, inv_std, g, mean_dy, mean_dy_xhat);
  }
}

namespace {

// The affine weight and bias take the usual init and multiplier keys; only
// their initial values differ from other layers'.
std::vector<KeyDoc> batch_norm_keys() {
  return {
      {"eps", "float", "1e-5", "added to the variance before the square root"},
      {"momentum", "float", "0.1", "running = (1 - momentum) * running + momentum * batch statistic"},
      {"affine", "bool", "true", "learn a per-channel weight and bias"},
      {"weight_init", "init", "constant 1", "as for any weight"},
      {"bias_init", "init", "constant 0", "as for any bias"},
      {"lr_mult", "float", "1", "learning-rate multiplier of the weight"},
      {"decay_mult", "float", "1", "weight-decay multiplier of the weight"},
      {"bias_lr_mult", "float", "1", "learning-rate multiplier of the bias"},
      {"bias_decay_mult", "float", "1", "weight-decay multiplier of the bias"},
  };
}

}  // namespace

POSEIDON_REGISTER_LAYER(BatchNormLayer, "batch_norm",
                        "batch normalisation per channel (dimension 1), PyTorch semantics", batch_norm_keys());

}  // namespace poseidon
