// Batch normalisation on the GPU with own kernels rather than cuDNN's: the
// layer accepts any [N, C, ...] input with or without the affine pair, its
// test-phase backward treats the statistics as constants, and its sums run
// in double like the CPU layer's, none of which cuDNN's batch norm offers as
// one. Forward reads x twice: once for each channel's statistics, count,
// mean and M2 in double from one pass (core/cuda/channel_moments.h: many
// blocks per channel, their chunks joined in a fixed order with Chan et
// al.'s formula, so the statistics are the same bits run after run and keep
// their digits where the mean is large next to the spread), once to
// normalise. Backward too: once for each channel's sums of dy and dy * xhat,
// split over a grid of blocks, channels by chunks of the channel's N * H * W
// values, so that a few channels of many values fill the GPU as well as many
// channels of few, the chunks then added in order
// (core/cuda/channel_chunks.cuh); once for the input gradient. As on the CPU, backward adds into the input gradient and
// overwrites the weight and bias gradients, and bfloat16 blobs are widened
// as they are read and each result rounded once as it is written
// (core/cuda/elements.cuh), the arithmetic float32's either way.
#include "core/cuda/channel_chunks.cuh"
#include "core/cuda/channel_moments.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"
#include "core/error.h"
#include "core/registry.h"
#include "layers/batch_norm.h"

namespace poseidon {

namespace {

// Block (chunk, c), for channels c = blockIdx.y, blockIdx.y + gridDim.y, ...
// (a grid has at most 65535 rows): the partial sums of dy and of dy * xhat
// over the chunk.
template <class T>
__global__ void gradient_partial_sums(const T* x, const T* dy, const float* mean, const float* inv_std,
                                      int64_t channels, int64_t spatial, int64_t count, cuda::Chunks split,
                                      double* partial_dy, double* partial_dy_xhat) {
  __shared__ double scratch[cuda::kChunkThreads];
  const int64_t chunk = blockIdx.x;
  const int64_t begin = cuda::chunk_begin(split, chunk), end = cuda::chunk_end(split, chunk, count);
  for (int64_t c = blockIdx.y; c < channels; c += gridDim.y) {
    const float m = mean[c], s = inv_std[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += cuda::kChunkThreads) {
      const int64_t k = cuda::value_index(i, c, channels, spatial);
      const float g = cuda::load(dy, k);
      sum_dy += g;
      sum_dy_xhat += double(g) * ((cuda::load(x, k) - m) * s);
    }
    sum_dy = cuda::block_sum(sum_dy, scratch);
    sum_dy_xhat = cuda::block_sum(sum_dy_xhat, scratch);
    if (threadIdx.x == 0) {
      partial_dy[c * split.chunks + chunk] = sum_dy;
      partial_dy_xhat[c * split.chunks + chunk] = sum_dy_xhat;
    }
  }
}

// The batch mean and 1/sqrt(biased variance + eps) of each channel, and the
// running statistics' update with the unbiased variance.
__global__ void finish_statistics(const Moments* moments, int64_t channels, double eps, double momentum,
                                  float* mean_out, float* inv_std_out, float* running_mean, float* running_var) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    const Moments m = moments[c];
    const double var = m.m2 / m.count;
    mean_out[c] = static_cast<float>(m.mean);
    inv_std_out[c] = static_cast<float>(1.0 / sqrt(var + eps));
    running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * m.mean);
    running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * m.m2 / (m.count - 1));
  }
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
template <class T>
__global__ void normalize(const T* x, T* y, const float* mean, const float* inv_std, const float* w, const float* b,
                          size_t n, int64_t channels, int64_t spatial) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int64_t c = (static_cast<int64_t>(i) / spatial) % channels;
    const float scale = inv_std[c] * (w ? w[c] : 1.f);
    const float shift = (b ? b[c] : 0.f) - mean[c] * scale;
    cuda::store(y, i, cuda::load(x, i) * scale + shift);
  }
}

// Per channel: the weight and bias gradients (dw, db may be null), and the
// means of dy and dy * xhat that dx needs (zero with fixed statistics).
__global__ void finish_gradients(const double* partial_dy, const double* partial_dy_xhat, int64_t channels,
                                 int64_t count, int64_t chunks, bool batch_stats, float* dw, float* db, float* mean_dy,
                                 float* mean_dy_xhat) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    const double sum_dy = cuda::channel_total(partial_dy, c, chunks);
    const double sum_dy_xhat = cuda::channel_total(partial_dy_xhat, c, chunks);
    if (dw) dw[c] = static_cast<float>(sum_dy_xhat);
    if (db) db[c] = static_cast<float>(sum_dy);
    mean_dy[c] = batch_stats ? static_cast<float>(sum_dy / count) : 0.f;
    mean_dy_xhat[c] = batch_stats ? static_cast<float>(sum_dy_xhat / count) : 0.f;
  }
}

// dx += g * (dy - mean(dy) - xhat * mean(dy * xhat)), g = inv_std * w.
template <class T>
__global__ void input_gradient(const T* x, const T* dy, T* dx, const float* mean, const float* inv_std, const float* w,
                               const float* mean_dy, const float* mean_dy_xhat, size_t n, int64_t channels,
                               int64_t spatial) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int64_t c = (static_cast<int64_t>(i) / spatial) % channels;
    const float s = inv_std[c];
    const float g = s * (w ? w[c] : 1.f);
    const float xhat = (cuda::load(x, i) - mean[c]) * s;
    cuda::store(dx, i, cuda::load(dx, i) + g * (cuda::load(dy, i) - mean_dy[c] - xhat * mean_dy_xhat[c]));
  }
}

class BatchNormCudaLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;
  bool writes_input_grads() const override { return false; }  // the CPU class's backward only

  // No GPU kernel applies a ReLU of its own: the ReLU layer stays.
  bool fuse_relu() override { return false; }

  void forward(LayerIO& io, RunContext& ctx) override {
    const Tensor& x = *io.in[0];
    const Extent e = extent(x);
    batch_stats_ = ctx.phase == Phase::train;
    if (batch_stats_) check_batch(x, e);
    if (e.channels == 0) return;
    cuda::Context& gpu = cuda::Context::get(ctx.device.index);
    cudaStream_t stream = gpu.compute();
    keep_statistics(e.channels, ctx.device);
    const unsigned channel_blocks = cuda::blocks_for(e.channels);
    if (batch_stats_) {
      Moments* moments = scratch_for(e.channels, 0, ctx.device).moments;
      cuda::with_element_type(x.dtype(), [&](auto t) {
        cuda::channel_moments(gpu, moments, cuda::elements<decltype(t)>(x), e.batch, e.channels, e.spatial);
      });
      finish_statistics<<<channel_blocks, 256, 0, stream>>>(moments, e.channels, eps_, momentum_, used_mean_.data(),
                                                            used_inv_std_.data(), running_mean().value.data(),
                                                            running_var().value.data());
    } else {
      running_statistics<<<channel_blocks, 256, 0, stream>>>(running_mean().value.data(), running_var().value.data(),
                                                             e.channels, eps_, used_mean_.data(), used_inv_std_.data());
    }
    POSEIDON_CUDA_CHECK_LAUNCH();
    const size_t n = x.numel();
    if (!n) return;
    cuda::with_element_type(x.dtype(), [&](auto t) {
      using T = decltype(t);
      normalize<<<cuda::blocks_for(n), 256, 0, stream>>>(
          cuda::elements<T>(x), cuda::elements<T>(*io.out[0]), used_mean_.data(), used_inv_std_.data(),
          affine_ ? param(0).value.data() : nullptr, affine_ ? param(1).value.data() : nullptr, n, e.channels,
          e.spatial);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const Tensor& x = *io.in[0];
    const Extent e = extent(x);
    if (e.channels == 0) return;
    POSEIDON_CHECK(used_mean_.numel() == e.channels) << name() << ": backward before forward";
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    const cuda::Chunks split = cuda::chunks_for(e.count);
    Scratch scratch = scratch_for(e.channels, split.chunks, ctx.device);
    const dim3 grid(static_cast<unsigned>(split.chunks), cuda::chunk_grid_rows(e.channels));
    cuda::with_element_type(x.dtype(), [&](auto t) {
      using T = decltype(t);
      gradient_partial_sums<<<grid, cuda::kChunkThreads, 0, stream>>>(
          cuda::elements<T>(x), cuda::elements<T>(*io.out_grad[0]), used_mean_.data(), used_inv_std_.data(), e.channels,
          e.spatial, e.count, split, scratch.partial_a, scratch.partial_b);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
    finish_gradients<<<cuda::blocks_for(e.channels), 256, 0, stream>>>(
        scratch.partial_a, scratch.partial_b, e.channels, e.count, split.chunks, batch_stats_,
        affine_ ? param(0).grad.data() : nullptr, affine_ ? param(1).grad.data() : nullptr, scratch.mean_dy,
        scratch.mean_dy_xhat);
    POSEIDON_CUDA_CHECK_LAUNCH();
    const size_t n = x.numel();
    if (!io.in_grad[0] || !n) return;
    cuda::with_element_type(x.dtype(), [&](auto t) {
      using T = decltype(t);
      input_gradient<<<cuda::blocks_for(n), 256, 0, stream>>>(
          cuda::elements<T>(x), cuda::elements<T>(*io.out_grad[0]), cuda::elements<T>(*io.in_grad[0]),
          used_mean_.data(), used_inv_std_.data(), affine_ ? param(0).value.data() : nullptr, scratch.mean_dy,
          scratch.mean_dy_xhat, n, e.channels, e.spatial);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  // Views into scratch_ for one call: two partial-sum arrays of C x chunks
  // doubles, C moments, and C floats each of the backward means.
  struct Scratch {
    double *partial_a, *partial_b;
    Moments* moments;
    float *mean_dy, *mean_dy_xhat;
  };

  Scratch scratch_for(int64_t channels, int64_t chunks, const Device& device) {
    static_assert(sizeof(Moments) == 3 * sizeof(double));
    const int64_t doubles = 2 * channels * chunks + 3 * channels;
    const int64_t floats = 2 * doubles + 2 * channels;
    if (scratch_.device() != device) scratch_ = Tensor::on(device);
    if (scratch_.numel() < floats) scratch_.resize({floats});
    // The caching allocator's blocks are aligned far beyond 8 bytes.
    auto* d = reinterpret_cast<double*>(scratch_.data());
    float* f = reinterpret_cast<float*>(d + doubles);
    return {d, d + channels * chunks, reinterpret_cast<Moments*>(d + 2 * channels * chunks), f, f + channels};
  }

  // Device buffers for the statistics, reallocated only when C changes.
  void keep_statistics(int64_t channels, const Device& device) {
    if (used_mean_.numel() == channels && used_mean_.device() == device) return;
    used_mean_ = Tensor({channels}, device);
    used_inv_std_ = Tensor({channels}, device);
  }

  Tensor used_mean_, used_inv_std_;  // per channel, as used by the last forward
  Tensor scratch_;                   // partial sums, moments and backward means (Scratch)
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(BatchNormCudaLayer, "batch_norm");

}  // namespace poseidon
