// Concat on the GPU: each input is one strided copy into its columns of the
// output (outer rows, each `row` floats long at a pitch of the output's
// row), and backward adds each input's columns of the gradient back.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/registry.h"
#include "layers/concat.h"

namespace poseidon {

namespace {

// dx[o, i] += dy[o, offset + i] for o < outer, i < row.
__global__ void add_slice(const float* dy, float* dx, int64_t outer, int64_t row, int64_t out_row, int64_t offset) {
  const int64_t total = outer * row;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x)
    dx[j] += dy[j / row * out_row + offset + j % row];
}

class ConcatCudaLayer : public ConcatLayer {
 public:
  using ConcatLayer::ConcatLayer;
  bool writes_input_grads() const override { return false; }  // the CPU class's backward only

  void forward(LayerIO& io, RunContext& ctx) override {
    if (!io.out[0]->numel()) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    const int64_t out_row = io.out[0]->numel() / outer_;
    float* y = io.out[0]->data();
    int64_t offset = 0;
    for (const Tensor* x : io.in) {
      const int64_t row = x->numel() / outer_;
      // One row: a plain copy, free of the limit on a 2-D copy's pitch.
      if (row > 0 && outer_ == 1)
        POSEIDON_CUDA_CHECK(
            cudaMemcpyAsync(y + offset, x->data(), row * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      else if (row > 0)
        POSEIDON_CUDA_CHECK(cudaMemcpy2DAsync(y + offset, out_row * sizeof(float), x->data(), row * sizeof(float),
                                              row * sizeof(float), outer_, cudaMemcpyDeviceToDevice, stream));
      offset += row;
    }
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.out_grad[0]->numel()) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    const int64_t out_row = io.out_grad[0]->numel() / outer_;
    int64_t offset = 0;
    for (size_t k = 0; k < io.in.size(); ++k) {
      const int64_t row = io.in[k]->numel() / outer_;
      if (io.in_grad[k] && row > 0) {
        add_slice<<<cuda::blocks_for(outer_ * row), 256, 0, stream>>>(io.out_grad[0]->data(), io.in_grad[k]->data(),
                                                                      outer_, row, out_row, offset);
        POSEIDON_CUDA_CHECK_LAUNCH();
      }
      offset += row;
    }
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ConcatCudaLayer, "concat");

}  // namespace poseidon
