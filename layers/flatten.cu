// Flatten on the GPU: the forward copy is the CPU layer's own (a device copy
// on the compute stream); backward adds the gradient back with one axpy, or
// into a bfloat16 gradient with the sum in float32, rounded once, as on the
// CPU.
#include "core/cuda/bf16.h"
#include "core/cuda/context.h"
#include "core/cuda/kernels.h"
#include "core/registry.h"
#include "layers/flatten.h"

namespace poseidon {

namespace {

class FlattenCudaLayer : public FlattenLayer {
 public:
  using FlattenLayer::FlattenLayer;

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.in_grad[0]) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (io.in_grad[0]->dtype() == DType::bf16)
      cuda::add_rounded_into_bf16(io.in_grad[0]->bf16_data(), io.out_grad[0]->bf16_data(), io.out_grad[0]->numel(),
                                  stream);
    else
      cuda::axpy(io.in_grad[0]->data(), io.out_grad[0]->data(), io.out_grad[0]->numel(), 1.f, stream);
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(FlattenCudaLayer, "flatten");

}  // namespace poseidon
