// Sum on the GPU: the first input scaled into the output, then each further
// input added with its coefficient, in input order like the CPU; backward
// adds each input's scaled share of the gradient.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/kernels.h"
#include "core/registry.h"
#include "layers/sum.h"

namespace poseidon {

namespace {

__global__ void scale_into(const float* x, float c, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = c * x[i];
}

class SumCudaLayer : public SumLayer {
 public:
  using SumLayer::SumLayer;
  bool writes_input_grads() const override { return false; }  // the CPU class's backward only

  // No GPU kernel applies a ReLU of its own: the ReLU layer stays.
  bool fuse_relu() override { return false; }

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    float* y = io.out[0]->data();
    scale_into<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), coefficients_[0], y, n);
    POSEIDON_CUDA_CHECK_LAUNCH();
    for (size_t k = 1; k < io.in.size(); ++k) cuda::axpy(y, io.in[k]->data(), n, coefficients_[k], stream);
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out_grad[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    for (size_t k = 0; k < io.in.size(); ++k)
      if (io.in_grad[k]) cuda::axpy(io.in_grad[k]->data(), io.out_grad[0]->data(), n, coefficients_[k], stream);
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(SumCudaLayer, "sum");

}  // namespace poseidon
