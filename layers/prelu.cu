// PReLU on the GPU: element-wise kernels for the output and the input
// gradient, and one block per slope summing x * dy over its values where
// x <= 0 in double (CUB's block reduction, a fixed order), as the CPU does.
#include <climits>
#include <cub/block/block_reduce.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/prelu.h"

namespace poseidon {

namespace {

constexpr int kThreads = 256;  // per block of the slope gradient

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

// Block c: da[c] = sum of x * dy over channel c's values where x <= 0.
__global__ void prelu_slope_grad(const float* x, const float* dy, float* da, int64_t batch, int64_t channels,
                                 int64_t spatial) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage scratch;
  const int64_t c = blockIdx.x, count = batch * spatial;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const int64_t n = i / spatial;
    const int64_t k = (n * channels + c) * spatial + (i - n * spatial);
    if (x[k] <= 0.f) sum += double(x[k]) * dy[k];
  }
  sum = Reduce(scratch).Sum(sum);
  if (threadIdx.x == 0) da[c] = static_cast<float>(sum);
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
    POSEIDON_CHECK(e.channels <= INT_MAX) << e.channels << " channels exceed one grid";
    prelu_slope_grad<<<static_cast<unsigned>(e.channels), kThreads, 0, stream>>>(
        io.in[0]->data(), io.out_grad[0]->data(), param(0).grad.data(), e.batch, e.channels, e.spatial);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(PreluCudaLayer, "prelu");

}  // namespace poseidon
