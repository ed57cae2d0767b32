// Batch normalisation on the CPU (see batch_norm.h).
#include "layers/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "core/bf16.h"
#include "core/registry.h"
#include "layers/cpu_vector.h"
#include "layers/relu_kernels.h"

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
  sums_.resize(3 * channels);
  coefficients_.resize(3 * channels);
  return {s};
}

namespace {

// A block of consecutive channels of an [N, C, S] tensor: for each of batch
// images, channels * spatial consecutive values, stride apart. Blocks hold
// one channel where planes are large and several where they are small (down
// to Inception's 1x1), so that each image's run is long enough for the
// loops and the prefetcher, and the block's values stay in cache between its
// passes.
struct Block {
  int64_t batch, stride, channels, spatial;
  int64_t run() const { return channels * spatial; }
};

// Asks for image n + 1's run of a block while image n's is read: the runs are
// short and far apart, too short for the hardware prefetcher to find before
// each ends. One request per 64-byte line.
template <class T>
inline void prefetch_next_run(const T* run, Block b, int64_t n) {
  if (n + 1 >= b.batch) return;
  for (int64_t i = 0; i < b.run(); i += 64 / sizeof(T)) __builtin_prefetch(run + b.stride + i);
}

// The same for a run about to be written.
template <class T>
inline void prefetch_next_run_for_write(T* run, Block b, int64_t n) {
  if (n + 1 >= b.batch) return;
  for (int64_t i = 0; i < b.run(); i += 64 / sizeof(T)) __builtin_prefetch(run + b.stride + i, 1);
}

// Per channel, sums of d = x - shift[c] and of d * d in one pass, in double.
// The shift is a value of the channel, and no value lies more than
// sqrt(count) standard deviations from the mean, so squares - sum^2 / count
// cancels at most a factor count of double's precision: the variance keeps
// fp32 precision up to 1e8 values per channel, as a second, centred pass
// would give it.
template <class T>
POSEIDON_VECTOR_CLONES void block_shifted_sums(const T* x, Block b, const double* shift, double* sum, double* squares) {
  std::fill(sum, sum + b.channels, 0.0);
  std::fill(squares, squares + b.channels, 0.0);
  for (int64_t n = 0; n < b.batch; ++n) {
    const T* run = x + n * b.stride;
    prefetch_next_run(run, b, n);
    for (int64_t c = 0; c < b.channels; ++c) {
      const T* row = run + c * b.spatial;
      const double k = shift[c];
      double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t s = 0; s < b.spatial; ++s) {
        const double d = as_float(row[s]) - k;
        s1 += d;
        s2 += d * d;
      }
      sum[c] += s1;
      squares[c] += s2;
    }
  }
}

// Writes value(i), i in [0, n), to a row: float32 directly, bfloat16
// through a float32 buffer on the stack that core/blob_types.h's explicit
// AVX-512 rounding writes out (GCC vectorises to_bf16 itself in 256-bit
// registers with blends and packs, several times the instructions).
// Inlined into each caller, so that the loop is compiled for the caller's
// vector clone.
template <class Value>
__attribute__((always_inline)) inline void write_row(float* dst, int64_t n, Value value) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = value(i);
}

template <class Value>
__attribute__((always_inline)) inline void write_row(uint16_t* dst, int64_t n, Value value) {
  constexpr int64_t kBuffer = 256;
  float buffer[kBuffer];
  for (int64_t b = 0; b < n; b += kBuffer) {
    const int64_t m = std::min(kBuffer, n - b);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) buffer[i] = value(b + i);
    round_into_bf16_serially(buffer, dst + b, m);
  }
}

// y = (x - mean[c]) * scale[c] + shift[c], or max of that and 0 with a ReLU
// fused (the ReLU layer's expression, so that the two agree bit for bit).
// The mean comes off first: x - mean is exact where they are close, so a
// channel whose mean is large next to its spread loses no digits to it, as
// x * scale - mean * scale would. A bfloat16 y is the float32 result
// rounded once.
template <class T>
POSEIDON_VECTOR_CLONES void block_affine(const T* x, T* y, Block b, const float* mean, const float* scale,
                                         const float* shift, bool relu) {
  for (int64_t n = 0; n < b.batch; ++n) {
    const T* in = x + n * b.stride;
    T* out = y + n * b.stride;
    prefetch_next_run_for_write(out, b, n);
    for (int64_t c = 0; c < b.channels; ++c) {
      const float m = mean[c], a = scale[c], k = shift[c];
      const T* row = in + c * b.spatial;
      T* dst = out + c * b.spatial;
      if (relu) {
        write_row(dst, b.spatial, [&](int64_t s) {
          const float v = (as_float(row[s]) - m) * a + k;
          return v > 0.f ? v : 0.f;
        });
      } else {
        write_row(dst, b.spatial, [&](int64_t s) { return (as_float(row[s]) - m) * a + k; });
      }
    }
  }
}

// The gradient at a fused ReLU's input: dy where the ReLU's output y is
// positive, +0 elsewhere, the ReLU layer's expression; without a ReLU, dy.
// Taken on the bits, dy read either way: GCC vectorises the passes' sums
// over that where it would not over a conditional value.
template <bool kRelu>
inline float input_side_grad(float y, float dy) {
  if (!kRelu) return dy;
  const uint32_t keep = y > 0.f ? 0xffffffffu : 0u;
  return bits_float(float_bits(dy) & keep);
}

template <bool kRelu>
inline float input_side_grad(uint16_t y, uint16_t dy) {
  if (!kRelu) return from_bf16(dy);
  const uint16_t keep = bf16_positive(y) ? 0xffff : 0;
  return from_bf16(dy & keep);
}

// Per channel, sums of dy and of dy * xhat, both in one pass, dy taken at
// the input side of a fused ReLU.
template <bool kRelu, class T>
POSEIDON_VECTOR_CLONES void block_grad_sums(const T* x, const T* y, const T* dy, Block b, const float* mean,
                                            const float* inv_std, double* sum_dy, double* sum_dy_xhat) {
  std::fill(sum_dy, sum_dy + b.channels, 0.0);
  std::fill(sum_dy_xhat, sum_dy_xhat + b.channels, 0.0);
  for (int64_t n = 0; n < b.batch; ++n) {
    const int64_t at = n * b.stride;
    prefetch_next_run(x + at, b, n);
    prefetch_next_run(dy + at, b, n);
    if (kRelu) prefetch_next_run(y + at, b, n);
    for (int64_t c = 0; c < b.channels; ++c) {
      const int64_t row = at + c * b.spatial;
      const float m = mean[c], is = inv_std[c];
      double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t s = 0; s < b.spatial; ++s) {
        const float gs = input_side_grad<kRelu>(y[row + s], dy[row + s]);
        s1 += gs;
        s2 += double(gs) * ((as_float(x[row + s]) - m) * is);
      }
      sum_dy[c] += s1;
      sum_dy_xhat[c] += s2;
    }
  }
}

// dx += g[c] * (dy - mean_dy[c] - xhat * mean_dy_xhat[c]), dy at the input
// side of a fused ReLU, the sum taken in float32 and a bfloat16 dx rounded
// once.
template <bool kRelu, class T>
POSEIDON_VECTOR_CLONES void block_input_grad(const T* x, const T* y, const T* dy, T* dx, bool overwrite, Block b,
                                             const float* mean, const float* inv_std, const float* g,
                                             const float* mean_dy, const float* mean_dy_xhat) {
  for (int64_t n = 0; n < b.batch; ++n) {
    const int64_t at = n * b.stride;
    prefetch_next_run_for_write(dx + at, b, n);
    for (int64_t c = 0; c < b.channels; ++c) {
      const int64_t row = at + c * b.spatial;
      const T* xr = x + row;
      const T* yr = y + row;
      const T* gr = dy + row;
      T* dst = dx + row;
      const float m = mean[c], is = inv_std[c], gc = g[c], md = mean_dy[c], mdx = mean_dy_xhat[c];
      const auto term = [&](int64_t s) {
        return gc * (input_side_grad<kRelu>(yr[s], gr[s]) - md - (as_float(xr[s]) - m) * is * mdx);
      };
      if (overwrite)
        write_row(dst, b.spatial, term);
      else
        write_row(dst, b.spatial, [&](int64_t s) { return as_float(dst[s]) + term(s); });
    }
  }
}

// Channels per block: runs of at least 512 values per image.
int64_t block_channels(int64_t spatial) { return std::max<int64_t>(1, 512 / spatial); }

}  // namespace

// Block by block of channels: the normalisation reads the block's values
// while they are still in cache from the pass that took its statistics, so
// the input comes from memory once. A bfloat16 input is widened as it is
// read and the output rounded once as it is written: the arithmetic is
// float32's (and double's) either way.
void BatchNormLayer::forward(LayerIO& io, RunContext& ctx) {
  const Tensor& x = *io.in[0];
  const Extent e = extent(x);
  batch_stats_ = ctx.phase == Phase::train;
  if (batch_stats_) check_batch(x, e);
  if (x.dtype() == DType::bf16)
    forward_blocks(x.bf16_data(), io.out[0]->bf16_data(), e);
  else
    forward_blocks(x.data(), io.out[0]->data(), e);
}

template <class T>
void BatchNormLayer::forward_blocks(const T* px, T* py, const Extent& e) {
  const float* w = affine_ ? param(0).value.data() : nullptr;
  const float* b = affine_ ? param(1).value.data() : nullptr;
  float* rm = running_mean().value.data();
  float* rv = running_var().value.data();
  const double m = momentum_;
  const int64_t C = e.channels, per_block = block_channels(e.spatial), blocks = (C + per_block - 1) / per_block;
  double *shift = sums_.data(), *sum = shift + C, *squares = sum + C;
  float *scale = coefficients_.data(), *offset = scale + C;
#pragma omp parallel for schedule(static) if (e.batch * C * e.spatial > 32768)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t c0 = k * per_block, c1 = std::min(C, c0 + per_block);
    const Block blk{e.batch, C * e.spatial, c1 - c0, e.spatial};
    const T* xb = px + c0 * e.spatial;
    if (batch_stats_) {
      for (int64_t c = c0; c < c1; ++c) shift[c] = as_float(xb[(c - c0) * e.spatial]);
      block_shifted_sums(xb, blk, shift + c0, sum + c0, squares + c0);
    }
    for (int64_t c = c0; c < c1; ++c) {
      if (batch_stats_) {
        const double mean = shift[c] + sum[c] / e.count;
        const double centred = std::max(squares[c] - sum[c] * sum[c] / e.count, 0.0);
        mean_[c] = static_cast<float>(mean);
        inv_std_[c] = static_cast<float>(1.0 / std::sqrt(centred / e.count + eps_));
        rm[c] = static_cast<float>((1 - m) * rm[c] + m * mean);
        rv[c] = static_cast<float>((1 - m) * rv[c] + m * centred / (e.count - 1));
      } else {
        mean_[c] = rm[c];
        inv_std_[c] = static_cast<float>(1.0 / std::sqrt(double(rv[c]) + eps_));
      }
      scale[c] = inv_std_[c] * (w ? w[c] : 1.f);
      offset[c] = b ? b[c] : 0.f;
    }
    block_affine(xb, py + c0 * e.spatial, blk, mean_.data() + c0, scale + c0, offset + c0, relu_fused_);
  }
}

// Per block of channels, both sums in one pass and then the input gradient,
// which reads x and dy again while they are in cache. A fused ReLU's
// backward is taken as each pass reads dy (core/relu_fusion.h).
void BatchNormLayer::backward(LayerIO& io, RunContext&) {
  const Tensor& x = *io.in[0];
  const Extent e = extent(x);
  const Tensor& dy = *io.out_grad[0];
  Tensor* dx = io.in_grad[0];
  const bool overwrite = io.overwrites_input_grad(0);
  if (x.dtype() == DType::bf16)
    backward_blocks(x.bf16_data(), io.out[0]->bf16_data(), dy.bf16_data(), dx ? dx->bf16_data() : nullptr, overwrite,
                    e);
  else
    backward_blocks(x.data(), io.out[0]->data(), dy.data(), dx ? dx->data() : nullptr, overwrite, e);
}

template <class T>
void BatchNormLayer::backward_blocks(const T* px, const T* py, const T* dy, T* dx, bool overwrite, const Extent& e) {
  if (relu_fused_)
    backward_blocks<true>(px, py, dy, dx, overwrite, e);
  else
    backward_blocks<false>(px, py, dy, dx, overwrite, e);
}

template <bool kRelu, class T>
void BatchNormLayer::backward_blocks(const T* px, const T* py, const T* dy, T* dx, bool overwrite, const Extent& e) {
  const float* w = affine_ ? param(0).value.data() : nullptr;
  float* dw = affine_ ? param(0).grad.data() : nullptr;
  float* db = affine_ ? param(1).grad.data() : nullptr;
  const int64_t C = e.channels, per_block = block_channels(e.spatial), blocks = (C + per_block - 1) / per_block;
  double *sum_dy = sums_.data(), *sum_dy_xhat = sum_dy + C;
  float *g = coefficients_.data(), *mean_dy = g + C, *mean_dy_xhat = mean_dy + C;
#pragma omp parallel for schedule(static) if (e.batch * C * e.spatial > 32768)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t c0 = k * per_block, c1 = std::min(C, c0 + per_block), off = c0 * e.spatial;
    const Block blk{e.batch, C * e.spatial, c1 - c0, e.spatial};
    block_grad_sums<kRelu>(px + off, py + off, dy + off, blk, mean_.data() + c0, inv_std_.data() + c0, sum_dy + c0,
                           sum_dy_xhat + c0);
    for (int64_t c = c0; c < c1; ++c) {
      if (dw) dw[c] = static_cast<float>(sum_dy_xhat[c]);
      if (db) db[c] = static_cast<float>(sum_dy[c]);
      // With batch statistics the mean and variance depend on x too:
      // dx = g * (dy - mean(dy) - xhat * mean(dy * xhat)).
      g[c] = inv_std_[c] * (w ? w[c] : 1.f);
      mean_dy[c] = batch_stats_ ? static_cast<float>(sum_dy[c] / e.count) : 0.f;
      mean_dy_xhat[c] = batch_stats_ ? static_cast<float>(sum_dy_xhat[c] / e.count) : 0.f;
    }
    if (dx)
      block_input_grad<kRelu>(px + off, py + off, dy + off, dx + off, overwrite, blk, mean_.data() + c0,
                              inv_std_.data() + c0, g + c0, mean_dy + c0, mean_dy_xhat + c0);
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
