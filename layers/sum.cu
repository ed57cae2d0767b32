// Sum on the GPU: float32 blobs take the first input scaled into the
// output, then each further input added with its coefficient, in input
// order like the CPU; backward adds each input's scaled share of the
// gradient. bfloat16 blobs (core/blob_types.h) take the CPU's rule and its
// float32 operations, unfused: the sum of every input in float32, in input
// order, rounded once; in backward each
// input gradient's sum in float32 rounded once, or its share rounded where
// the layer writes it first.
#include "core/bf16.h"
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

// The bfloat16 forward sums every input in one launch, up to this many; a
// sum of more reads float32 (the Net widens its inputs).
constexpr int kInputsPerLaunch = 16;

struct Bf16Inputs {
  const uint16_t* x[kInputsPerLaunch];
  float c[kInputsPerLaunch];
  int count;
};

__global__ void sum_bf16(Bf16Inputs in, uint16_t* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < in.count; ++k) acc = __fadd_rn(acc, __fmul_rn(in.c[k], from_bf16(in.x[k][i])));
    y[i] = to_bf16(acc);
  }
}

// dx = (dx + c dy) rounded, or (c dy) rounded where the layer writes dx first.
__global__ void share_bf16(const uint16_t* dy, float c, uint16_t* dx, bool overwrite, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float share = __fmul_rn(c, from_bf16(dy[i]));
    dx[i] = to_bf16(overwrite ? share : __fadd_rn(from_bf16(dx[i]), share));
  }
}

class SumCudaLayer : public SumLayer {
 public:
  using SumLayer::SumLayer;
  bool writes_input_grads() const override { return false; }  // the CPU class's backward only

  // No GPU kernel applies a ReLU of its own: the ReLU layer stays.
  bool fuse_relu() override { return false; }
  DType reads(const std::vector<DType>& in) const override {
    return in.size() > static_cast<size_t>(kInputsPerLaunch) ? DType::f32 : SumLayer::reads(in);
  }

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (io.out[0]->dtype() == DType::bf16) return forward_bf16(io, n, stream);
    float* y = io.out[0]->data();
    scale_into<<<cuda::blocks_for(n), 256, 0, stream>>>(io.in[0]->data(), coefficients_[0], y, n);
    POSEIDON_CUDA_CHECK_LAUNCH();
    for (size_t k = 1; k < io.in.size(); ++k) cuda::axpy(y, io.in[k]->data(), n, coefficients_[k], stream);
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out_grad[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    for (size_t k = 0; k < io.in.size(); ++k) {
      if (!io.in_grad[k]) continue;
      if (io.out_grad[0]->dtype() == DType::bf16) {
        share_bf16<<<cuda::blocks_for(n), 256, 0, stream>>>(io.out_grad[0]->bf16_data(), coefficients_[k],
                                                            io.in_grad[k]->bf16_data(), io.overwrites_input_grad(k), n);
        POSEIDON_CUDA_CHECK_LAUNCH();
      } else {
        cuda::axpy(io.in_grad[k]->data(), io.out_grad[0]->data(), n, coefficients_[k], stream);
      }
    }
  }

 private:
  void forward_bf16(LayerIO& io, size_t n, cudaStream_t stream) const {
    Bf16Inputs in{};
    for (size_t k = 0; k < io.in.size(); ++k) {
      in.x[k] = io.in[k]->bf16_data();
      in.c[k] = coefficients_[k];
    }
    in.count = static_cast<int>(io.in.size());
    sum_bf16<<<cuda::blocks_for(n), 256, 0, stream>>>(in, io.out[0]->bf16_data(), n);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(SumCudaLayer, "sum");

}  // namespace poseidon
