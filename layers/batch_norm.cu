// Batch normalisation on the GPU with own kernels rather than cuDNN's: the
// layer accepts any [N, C, ...] input with or without the affine pair, its
// test-phase backward treats the statistics as constants, and its sums run
// in double like the CPU layer's, none of which cuDNN's batch norm offers as
// one. One block per channel sums that channel's values (mean, then centred
// squares; dy and dy * xhat in backward); element-wise kernels apply the
// result. As on the CPU, backward adds into the input gradient and
// overwrites the weight and bias gradients.
#include <climits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/batch_norm.h"

namespace poseidon {

namespace {

constexpr int kThreads = 256;  // per block of the per-channel kernels

// The sum of every thread's `v` over the block, returned to all threads.
__device__ double block_sum(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();  // before the scratch is written again
  return total;
}

// Where value i (0 <= i < batch * spatial) of channel c sits in [N, C, S].
__device__ int64_t value_index(int64_t i, int64_t c, int64_t channels, int64_t spatial) {
  const int64_t n = i / spatial;
  return (n * channels + c) * spatial + (i - n * spatial);
}

// Block c: the batch mean and 1/sqrt(biased variance + eps) of channel c, and
// the running statistics' update with the unbiased variance.
__global__ void batch_statistics(const float* x, int64_t channels, int64_t spatial, int64_t count, double eps,
                                 double momentum, float* mean_out, float* inv_std_out, float* running_mean,
                                 float* running_var) {
  __shared__ double scratch[kThreads];
  const int64_t c = blockIdx.x;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) sum += x[value_index(i, c, channels, spatial)];
  const double mean = block_sum(sum, scratch) / count;
  double squares = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const double d = x[value_index(i, c, channels, spatial)] - mean;
    squares += d * d;
  }
  squares = block_sum(squares, scratch);
  if (threadIdx.x != 0) return;
  const double var = squares / count;
  mean_out[c] = static_cast<float>(mean);
  inv_std_out[c] = static_cast<float>(1.0 / sqrt(var + eps));
  running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * squares / (count - 1));
}

// The test phase's statistics: the running ones.
__global__ void running_statistics(const float* running_mean, const float* running_var, int64_t channels, double eps,
                                   float* mean_out, float* inv_std_out) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    mean_out[c] = running_mean[c];
    inv_std_out[c] = static_cast<float>(1.0 / sqrt(double(running_var[c]) + eps));
  }
}

// y = x * scale + shift per channel; w and b are null without the affine pair.
__global__ void normalize(const float* x, float* y, const float* mean, const float* inv_std, const float* w,
                          const float* b, size_t n, int64_t channels, int64_t spatial) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int64_t c = (static_cast<int64_t>(i) / spatial) % channels;
    const float scale = inv_std[c] * (w ? w[c] : 1.f);
    const float shift = (b ? b[c] : 0.f) - mean[c] * scale;
    y[i] = x[i] * scale + shift;
  }
}

// Block c: the sums of dy and dy * xhat over channel c give the weight and
// bias gradients (dw, db may be null); then dx (may be null) receives
//   g * (dy - mean(dy) - xhat * mean(dy * xhat))
// with batch statistics, or g * dy with fixed ones.
__global__ void backward_channel(const float* x, const float* dy, float* dx, const float* mean, const float* inv_std,
                                 const float* w, float* dw, float* db, int64_t channels, int64_t spatial, int64_t count,
                                 bool batch_stats) {
  __shared__ double scratch[kThreads];
  const int64_t c = blockIdx.x;
  const float m = mean[c], s = inv_std[c];
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const int64_t k = value_index(i, c, channels, spatial);
    sum_dy += dy[k];
    sum_dy_xhat += double(dy[k]) * ((x[k] - m) * s);
  }
  sum_dy = block_sum(sum_dy, scratch);
  sum_dy_xhat = block_sum(sum_dy_xhat, scratch);
  if (threadIdx.x == 0) {
    if (dw) dw[c] = static_cast<float>(sum_dy_xhat);
    if (db) db[c] = static_cast<float>(sum_dy);
  }
  if (!dx) return;
  const float g = s * (w ? w[c] : 1.f);
  const float mean_dy = batch_stats ? static_cast<float>(sum_dy / count) : 0.f;
  const float mean_dy_xhat = batch_stats ? static_cast<float>(sum_dy_xhat / count) : 0.f;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const int64_t k = value_index(i, c, channels, spatial);
    const float xhat = (x[k] - m) * s;
    dx[k] += g * (dy[k] - mean_dy - xhat * mean_dy_xhat);
  }
}

class BatchNormCudaLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const Tensor& x = *io.in[0];
    const Extent e = extent(x);
    batch_stats_ = ctx.phase == Phase::train;
    if (batch_stats_) check_batch(x, e);
    if (e.channels == 0) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    keep_statistics(e.channels, ctx.device);
    if (batch_stats_) {
      batch_statistics<<<channel_blocks(e.channels), kThreads, 0, stream>>>(
          x.data(), e.channels, e.spatial, e.count, eps_, momentum_, used_mean_.data(), used_inv_std_.data(),
          running_mean().value.data(), running_var().value.data());
    } else {
      running_statistics<<<cuda::blocks_for(e.channels), 256, 0, stream>>>(running_mean().value.data(),
                                                                           running_var().value.data(), e.channels, eps_,
                                                                           used_mean_.data(), used_inv_std_.data());
    }
    POSEIDON_CUDA_CHECK_LAUNCH();
    const size_t n = x.numel();
    if (!n) return;
    normalize<<<cuda::blocks_for(n), 256, 0, stream>>>(
        x.data(), io.out[0]->data(), used_mean_.data(), used_inv_std_.data(), affine_ ? param(0).value.data() : nullptr,
        affine_ ? param(1).value.data() : nullptr, n, e.channels, e.spatial);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const Tensor& x = *io.in[0];
    const Extent e = extent(x);
    if (e.channels == 0) return;
    POSEIDON_CHECK(used_mean_.numel() == e.channels) << name() << ": backward before forward";
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    backward_channel<<<channel_blocks(e.channels), kThreads, 0, stream>>>(
        x.data(), io.out_grad[0]->data(), io.in_grad[0] ? io.in_grad[0]->data() : nullptr, used_mean_.data(),
        used_inv_std_.data(), affine_ ? param(0).value.data() : nullptr, affine_ ? param(0).grad.data() : nullptr,
        affine_ ? param(1).grad.data() : nullptr, e.channels, e.spatial, e.count, batch_stats_);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  static unsigned channel_blocks(int64_t channels) {
    POSEIDON_CHECK(channels <= INT_MAX) << channels << " channels exceed one grid";
    return static_cast<unsigned>(channels);
  }

  // Device buffers for the statistics, reallocated only when C changes.
  void keep_statistics(int64_t channels, const Device& device) {
    if (used_mean_.numel() == channels && used_mean_.device() == device) return;
    used_mean_ = Tensor({channels}, device);
    used_inv_std_ = Tensor({channels}, device);
  }

  Tensor used_mean_, used_inv_std_;  // per channel, as used by the last forward
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(BatchNormCudaLayer, "batch_norm");

}  // namespace poseidon
