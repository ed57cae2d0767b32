// ReLU on the GPU: one element-wise kernel each way. The backward adds into
// the input gradient like every layer's backward (cuDNN's activation
// backward would overwrite it).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/registry.h"
#include "layers/relu.h"

namespace poseidon {

namespace {

__global__ void relu_forward(const float* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void relu_backward(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dx[i] += x[i] > 0.f ? dy[i] : 0.f;
}

class ReluCudaLayer : public ReluLayer {
 public:
  using ReluLayer::ReluLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    relu_forward<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), io.out[0]->data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!io.in_grad[0] || !n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    relu_backward<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), io.out_grad[0]->data(),
                                                          io.in_grad[0]->data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ReluCudaLayer, "relu");

}  // namespace poseidon
