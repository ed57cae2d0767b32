// Concat on the GPU: each input is one strided copy into its columns of the
// output (outer rows, each `row` elements long at a pitch of the output's
// row), and backward adds each input's columns of the gradient back. The
// copies move float32 and bfloat16 alike (core/blob_types.h); a bfloat16
// gradient's sum is taken in float32 and rounded once, as on the CPU.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"
#include "core/registry.h"
#include "layers/concat.h"

namespace poseidon {

namespace {

// dx[o, i] += dy[o, offset + i] for o < outer, i < row.
template <class T>
__global__ void add_slice(const T* dy, T* dx, int64_t outer, int64_t row, int64_t out_row, int64_t offset) {
  const int64_t total = outer * row;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x)
    cuda::store(dx, j, cuda::load(dx, j) + cuda::load(dy, j / row * out_row + offset + j % row));
}

// The first element of a device tensor of either type, as bytes.
char* bytes_of(const Tensor& t) {
  return t.dtype() == DType::bf16 ? reinterpret_cast<char*>(cuda::elements<uint16_t>(t))
                                  : reinterpret_cast<char*>(cuda::elements<float>(t));
}

class ConcatCudaLayer : public ConcatLayer {
 public:
  using ConcatLayer::ConcatLayer;
  bool writes_input_grads() const override { return false; }  // the CPU class's backward only

  void forward(LayerIO& io, RunContext& ctx) override {
    if (!io.out[0]->numel()) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    const int64_t out_row = io.out[0]->numel() / outer_;
    const size_t size = dtype_size(io.out[0]->dtype());
    char* y = bytes_of(*io.out[0]);
    int64_t offset = 0;
    for (const Tensor* x : io.in) {
      const int64_t row = x->numel() / outer_;
      // One row: a plain copy, free of the limit on a 2-D copy's pitch.
      if (row > 0 && outer_ == 1)
        POSEIDON_CUDA_CHECK(
            cudaMemcpyAsync(y + offset * size, bytes_of(*x), row * size, cudaMemcpyDeviceToDevice, stream));
      else if (row > 0)
        POSEIDON_CUDA_CHECK(cudaMemcpy2DAsync(y + offset * size, out_row * size, bytes_of(*x), row * size, row * size,
                                              outer_, cudaMemcpyDeviceToDevice, stream));
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
        cuda::with_element_type(io.out_grad[0]->dtype(), [&](auto t) {
          using T = decltype(t);
          add_slice<<<cuda::blocks_for(outer_ * row), 256, 0, stream>>>(
              cuda::elements<T>(*io.out_grad[0]), cuda::elements<T>(*io.in_grad[k]), outer_, row, out_row, offset);
        });
        POSEIDON_CUDA_CHECK_LAUNCH();
      }
      offset += row;
    }
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ConcatCudaLayer, "concat");

}  // namespace poseidon
