// Flatten on the GPU: the forward copy is the CPU layer's own (a device copy
// on the compute stream); backward adds the gradient back with one axpy.
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
    cuda::axpy(io.in_grad[0]->data(), io.out_grad[0]->data(), io.out_grad[0]->numel(), 1.f,
               cuda::Context::get(ctx.device.index).compute());
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(FlattenCudaLayer, "flatten");

}  // namespace poseidon
