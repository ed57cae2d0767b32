// ReLU on the GPU: one element-wise kernel each way, over float32 or
// bfloat16 blobs as the CPU layer reads them (relu.h). The backward adds
// into the input gradient like every layer's backward (cuDNN's activation
// backward would overwrite it); into a bfloat16 one the sum is taken in
// float32 and rounded once, as on the CPU.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"
#include "core/registry.h"
#include "layers/relu.h"

namespace poseidon {

namespace {

// A bfloat16 value passes or becomes +0 unchanged: the kernel writes the
// input's bits, never a rounded float.
template <class T>
__global__ void relu_forward(const T* x, T* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = cuda::load(x, i) > 0.f ? x[i] : T(0);
}

template <class T>
__global__ void relu_backward(const T* x, const T* dy, T* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(dx, i, cuda::load(dx, i) + (cuda::load(x, i) > 0.f ? cuda::load(dy, i) : 0.f));
}

class ReluCudaLayer : public ReluLayer {
 public:
  using ReluLayer::ReluLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    cuda::with_element_type(io.in[0]->dtype(), [&](auto t) {
      using T = decltype(t);
      relu_forward<<<cuda::blocks_for(n), 256, 0, stream>>>(cuda::elements<T>(*io.in[0]), cuda::elements<T>(*io.out[0]),
                                                            n);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.in[0]->numel();
    if (!io.in_grad[0] || !n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    cuda::with_element_type(io.in[0]->dtype(), [&](auto t) {
      using T = decltype(t);
      relu_backward<<<cuda::blocks_for(n), 256, 0, stream>>>(
          cuda::elements<T>(*io.in[0]), cuda::elements<T>(*io.out_grad[0]), cuda::elements<T>(*io.in_grad[0]), n);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ReluCudaLayer, "relu");

}  // namespace poseidon
