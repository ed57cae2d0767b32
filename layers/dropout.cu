// Dropout on the GPU with the CPU layer's mask: the forward takes the same
// one draw from the run's RNG as the CPU layer (DropoutLayer::draw_seed),
// and each kernel computes its elements' mask from it by the same function
// (layers/dropout_mask.h), forward and again in backward: no mask is copied
// from the host or stored, so a seed gives the same mask on any device and
// the host never waits for the GPU here. The seed reaches the kernels
// through GPU memory (device_memory::StepUpload), so their arguments stay
// the same from step to step, as a CUDA graph replays them. bfloat16 blobs
// (core/blob_types.h): the product in float32, rounded once, as on the CPU.
#include <cstring>
#include <memory>

#include "core/cuda/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"
#include "core/cuda/kernels.h"
#include "core/device_memory.h"
#include "core/registry.h"
#include "layers/dropout.h"
#include "layers/dropout_mask.h"

namespace poseidon {

namespace {

struct MaskArgs {
  const uint64_t* seed;  // GPU memory
  uint64_t threshold;
  float scale;
};

template <class T>
__global__ void apply_mask(const T* x, T* y, size_t n, MaskArgs m) {
  const uint64_t seed = *m.seed;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(y, i, cuda::load(x, i) * dropout_mask::element(seed, i, m.threshold, m.scale));
}

template <class T>
__global__ void add_masked(const T* dy, T* dx, size_t n, MaskArgs m) {
  const uint64_t seed = *m.seed;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(dx, i,  // unfused, as the CPU adds it
                __fadd_rn(cuda::load(dx, i),
                          __fmul_rn(cuda::load(dy, i), dropout_mask::element(seed, i, m.threshold, m.scale))));
}

class DropoutCudaLayer : public DropoutLayer {
 public:
  using DropoutLayer::DropoutLayer;

  // No host mask: the kernels compute it.
  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }

  void forward(LayerIO& io, RunContext& ctx) override {
    masked_ = ctx.phase == Phase::train;
    if (!masked_) {
      io.out[0]->copy_from(*io.in[0]);
      return;
    }
    if (!seed_upload_) seed_upload_ = std::make_unique<device_memory::StepUpload>(ctx.device, sizeof(uint64_t));
    const uint64_t seed = draw_seed(ctx);
    // A replay of a captured step draws again, from the same generator.
    seed_upload_->send(&seed, sizeof(seed), [this, rng = ctx.rng](void* slot) {
      RunContext draw{Phase::train, rng, Device{}};
      const uint64_t again = draw_seed(draw);
      std::memcpy(slot, &again, sizeof(again));
    });
    mask_args_ = {static_cast<const uint64_t*>(seed_upload_->target()), dropout_mask::drop_threshold(ratio_),
                  mask_scale()};
    const size_t n = io.in[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    cuda::with_element_type(io.in[0]->dtype(), [&](auto t) {
      using T = decltype(t);
      apply_mask<<<cuda::blocks_for(n), 256, 0, stream>>>(cuda::elements<T>(*io.in[0]), cuda::elements<T>(*io.out[0]),
                                                          n, mask_args_);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out_grad[0]->numel();
    if (!io.in_grad[0] || !n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    const bool bf16 = io.in_grad[0]->dtype() == DType::bf16;
    if (!masked_) {
      if (bf16)
        cuda::add_rounded_into_bf16(io.in_grad[0]->bf16_data(), io.out_grad[0]->bf16_data(), n, stream);
      else
        cuda::axpy(io.in_grad[0]->data(), io.out_grad[0]->data(), n, 1.f, stream);
      return;
    }
    cuda::with_element_type(io.in_grad[0]->dtype(), [&](auto t) {
      using T = decltype(t);
      add_masked<<<cuda::blocks_for(n), 256, 0, stream>>>(cuda::elements<T>(*io.out_grad[0]),
                                                          cuda::elements<T>(*io.in_grad[0]), n, mask_args_);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  std::unique_ptr<device_memory::StepUpload> seed_upload_;  // the training forward's draw, on its way to the GPU
  MaskArgs mask_args_{};  // the last training forward's
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(DropoutCudaLayer, "dropout");

}  // namespace poseidon
