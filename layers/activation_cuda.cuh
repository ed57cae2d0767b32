// The GPU side of the element-wise activations (activation.h): one kernel
// each way over every element, with the type's Math as on the CPU. The
// backward adds into the input gradient like every layer's backward.
#pragma once

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "layers/activation.h"

namespace poseidon {

namespace activation_kernels {

template <class Math>
__global__ void forward(Math math, const float* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = math.forward(x[i]);
}

template <class Math>
__global__ void backward(Math math, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dx[i] += math.slope(x[i], y[i]) * dy[i];
}

}  // namespace activation_kernels

template <class Math>
class ActivationCudaLayer : public ActivationLayer<Math> {
 public:
  using ActivationLayer<Math>::ActivationLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    activation_kernels::forward<<<cuda::blocks_for(n), 256, 0, stream>>>(this->math_, io.in[0]->data(),
                                                                         io.out[0]->data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!io.in_grad[0] || !n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    activation_kernels::backward<<<cuda::blocks_for(n), 256, 0, stream>>>(
        this->math_, io.in[0]->data(), io.out[0]->data(), io.out_grad[0]->data(), io.in_grad[0]->data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace poseidon
