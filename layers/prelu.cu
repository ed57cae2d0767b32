// PReLU on the GPU: element-wise kernels for the output and the input
// gradient, and each slope's gradient, the sum of x * dy over its values
// where x <= 0, in double as the CPU takes it: chunks of the slope's values
// summed by a grid of blocks, their partials then added in order
// (core/cuda/channel_chunks.cuh), so that one slope shared by every channel
// fills the GPU as per-channel slopes do.
#include "core/cuda/channel_chunks.cuh"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/registry.h"
#include "layers/prelu.h"

namespace poseidon {

namespace {

__global__ void prelu_forward(const float* x, const float* a, float* y, size_t n, int64_t channels, int64_t spatial) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float slope = a[(static_cast<int64_t>(i) / spatial) % channels];
    y[i] = x[i] > 0.f ? x[i] : slope * x[i];
  }
}

__global__ void prelu_input_grad(const float* x, const float* a, const float* dy, float* dx, size_t n, int64_t channels,
                                 int64_t spatial) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float slope = a[(static_cast<int64_t>(i) / spatial) % channels];
    dx[i] += x[i] > 0.f ? dy[i] : slope * dy[i];
  }
}

// Block (chunk, c), for slopes c = blockIdx.y, blockIdx.y + gridDim.y, ...:
// the partial sum of x * dy over the chunk's values of slope c where x <= 0.
__global__ void prelu_slope_partials(const float* x, const float* dy, int64_t channels, int64_t spatial, int64_t count,
                                     cuda::Chunks split, double* partial) {
  __shared__ double scratch[cuda::kChunkThreads];
  const int64_t chunk = blockIdx.x;
  const int64_t begin = cuda::chunk_begin(split, chunk), end = cuda::chunk_end(split, chunk, count);
  for (int64_t c = blockIdx.y; c < channels; c += gridDim.y) {
    double sum = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += cuda::kChunkThreads) {
      const int64_t k = cuda::value_index(i, c, channels, spatial);
      if (x[k] <= 0.f) sum += double(x[k]) * dy[k];
    }
    sum = cuda::block_sum(sum, scratch);
    if (threadIdx.x == 0) partial[c * split.chunks + chunk] = sum;
  }
}

// da[c] = slope c's partials added in order.
__global__ void prelu_slope_totals(const double* partial, int64_t channels, int64_t chunks, float* da) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x)
    da[c] = static_cast<float>(cuda::channel_total(partial, c, chunks));
}

class PreluCudaLayer : public PreluLayer {
 public:
  using PreluLayer::PreluLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!n) return;
    const Extent e = extent(*io.in[0]);
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    prelu_forward<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), param(0).value.data(), io.out[0]->data(),
                                                           n, e.channels, e.spatial);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    const Extent e = extent(*io.in[0]);
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (io.in_grad[0] && n) {
      prelu_input_grad<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), param(0).value.data(),
                                                                io.out_grad[0]->data(), io.in_grad[0]->data(), n,
                                                                e.channels, e.spatial);
      POSEIDON_CUDA_CHECK_LAUNCH();
    }
    if (e.channels == 0) return;
    const int64_t count = e.batch * e.spatial;
    const cuda::Chunks split = cuda::chunks_for(count);
    double* partial = partials(e.channels * split.chunks, ctx.device);
    const dim3 grid(static_cast<unsigned>(split.chunks), cuda::chunk_grid_rows(e.channels));
    prelu_slope_partials<<<grid, cuda::kChunkThreads, 0, stream>>>(io.in[0]->data(), io.out_grad[0]->data(), e.channels,
                                                                   e.spatial, count, split, partial);
    POSEIDON_CUDA_CHECK_LAUNCH();
    prelu_slope_totals<<<cuda::blocks_for(e.channels), 256, 0, stream>>>(partial, e.channels, split.chunks,
                                                                         param(0).grad.data());
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  // Room for n doubles on the device, grown only when a larger input needs
  // more (the caching allocator's blocks are aligned far beyond 8 bytes).
  double* partials(int64_t n, const Device& device) {
    if (scratch_.device() != device) scratch_ = Tensor::on(device);
    if (scratch_.numel() < 2 * n) scratch_.resize({2 * n});
    return reinterpret_cast<double*>(scratch_.data());
  }

  Tensor scratch_;  // the slopes' partial sums, as doubles
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(PreluCudaLayer, "prelu");

}  // namespace poseidon
