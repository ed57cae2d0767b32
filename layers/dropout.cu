// Dropout on the GPU with the CPU layer's mask: the mask is drawn on the
// host from the run's RNG exactly as the CPU draws it (DropoutLayer::
// draw_mask), so that a seed gives the same mask on any device, and copied to
// the GPU, where one kernel applies it each way. The copy goes through a
// pinned buffer, queued on the compute stream: a copy from pageable memory
// would hold the host until the GPU had caught up with the work queued
// before it, and stall the launches of the rest of the step.
#include <cstring>

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
    const size_t n = io.in[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    upload_mask(n, stream);
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

  ~DropoutCudaLayer() override {
    // May run at exit, after the driver has begun to unload: statuses are ignored.
    if (copied_) cudaEventDestroy(copied_);
    if (pinned_) cudaFreeHost(pinned_);
  }

 private:
  // Queues the copy of mask_ to device_mask_ through the pinned buffer,
  // once the previous copy has read it.
  void upload_mask(size_t n, cudaStream_t stream) {
    if (copied_) {
      POSEIDON_CUDA_CHECK(cudaEventSynchronize(copied_));
    } else {
      POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    }
    if (n > pinned_count_) {
      if (pinned_) POSEIDON_CUDA_CHECK(cudaFreeHost(pinned_));
      pinned_ = nullptr;
      POSEIDON_CUDA_CHECK(cudaMallocHost(&pinned_, n * sizeof(float)));
      pinned_count_ = n;
    }
    std::memcpy(pinned_, mask_.data(), n * sizeof(float));
    POSEIDON_CUDA_CHECK(
        cudaMemcpyAsync(device_mask_.data(), pinned_, n * sizeof(float), cudaMemcpyHostToDevice, stream));
    POSEIDON_CUDA_CHECK(cudaEventRecord(copied_, stream));
  }

  Tensor device_mask_;  // mask_ on the GPU, reused every iteration
  float* pinned_ = nullptr;  // the mask on its way there
  size_t pinned_count_ = 0;
  cudaEvent_t copied_ = nullptr;  // recorded after the last copy from pinned_
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(DropoutCudaLayer, "dropout");

}  // namespace poseidon
