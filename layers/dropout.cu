// Dropout on the GPU with the CPU layer's mask: the mask is drawn on the
// host from the run's RNG exactly as the CPU draws it (same draws, same
// order), so that a seed gives the same mask on any device, and copied to
// the GPU, where one kernel applies it each way.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/kernels.h"
#include "core/registry.h"
#include "layers/dropout.h"

namespace poseidon {

namespace {

__global__ void apply_mask(const float* x, const float* mask, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = x[i] * mask[i];
}

__global__ void add_masked(const float* dy, const float* mask, float* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dx[i] += dy[i] * mask[i];
}

class DropoutCudaLayer : public DropoutLayer {
 public:
  using DropoutLayer::DropoutLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    masked_ = ctx.phase == Phase::train;
    if (!masked_) {
      io.out[0]->copy_from(*io.in[0]);
      return;
    }
    draw_mask(ctx);
    if (device_mask_.device() != ctx.device) device_mask_ = Tensor::on(ctx.device);
    device_mask_.resize(mask_.shape());
    // Returns once the host mask has been read, so the next draw may overwrite it.
    device_mask_.copy_from(mask_);
    const size_t n = io.in[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    apply_mask<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), device_mask_.data(), io.out[0]->data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out_grad[0]->numel();
    if (!io.in_grad[0] || !n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (!masked_) {
      cuda::axpy(io.in_grad[0]->data(), io.out_grad[0]->data(), n, 1.f, stream);
      return;
    }
    add_masked<<<cuda::blocks_for(n), 256, 0, stream>>>(io.out_grad[0]->data(), device_mask_.data(),
                                                        io.in_grad[0]->data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  Tensor device_mask_;  // mask_ on the GPU, reused every iteration
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(DropoutCudaLayer, "dropout");

}  // namespace poseidon
