// Softmax on the GPU: a warp per (outer, inner) position, its lanes striding
// along the axis and combining maxima and sums by shuffles. The backward
// adds into the input gradient like every layer's backward.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/registry.h"
#include "layers/softmax.h"

namespace poseidon {

namespace {

constexpr unsigned kFullWarp = 0xffffffffu;

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarp, v, offset);
  return v;
}

// Every lane of a warp takes the same trips through the position loop, so
// the shuffles always find the whole warp.
__global__ void softmax_forward(const float* x, float* y, int64_t outer, int64_t size, int64_t inner) {
  const int64_t lane = threadIdx.x % 32, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t w = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; w < outer * inner; w += warps) {
    const int64_t base = w / inner * size * inner + w % inner;
    float max = -INFINITY;
    for (int64_t a = lane; a < size; a += 32) max = fmaxf(max, x[base + a * inner]);
    max = warp_max(max);
    float sum = 0.f;
    for (int64_t a = lane; a < size; a += 32) {
      const float e = expf(x[base + a * inner] - max);
      y[base + a * inner] = e;
      sum += e;
    }
    const float inv = 1.f / warp_sum(sum);
    for (int64_t a = lane; a < size; a += 32) y[base + a * inner] *= inv;
  }
}

__global__ void softmax_backward(const float* y, const float* dy, float* dx, int64_t outer, int64_t size,
                                 int64_t inner) {
  const int64_t lane = threadIdx.x % 32, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t w = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; w < outer * inner; w += warps) {
    const int64_t base = w / inner * size * inner + w % inner;
    float dot = 0.f;
    for (int64_t a = lane; a < size; a += 32) dot += dy[base + a * inner] * y[base + a * inner];
    dot = warp_sum(dot);
    for (int64_t a = lane; a < size; a += 32) {
      const int64_t j = base + a * inner;
      dx[j] += y[j] * (dy[j] - dot);
    }
  }
}

class SoftmaxCudaLayer : public SoftmaxLayer {
 public:
  using SoftmaxLayer::SoftmaxLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    if (!io.in[0]->numel()) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    softmax_forward<<<cuda::blocks_for(size_t(outer_ * inner_) * 32), 256, 0, stream>>>(
        io.in[0]->data(), io.out[0]->data(), outer_, size_, inner_);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.in_grad[0] || !io.out[0]->numel()) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    softmax_backward<<<cuda::blocks_for(size_t(outer_ * inner_) * 32), 256, 0, stream>>>(
        io.out[0]->data(), io.out_grad[0]->data(), io.in_grad[0]->data(), outer_, size_, inner_);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(SoftmaxCudaLayer, "softmax");

}  // namespace poseidon
