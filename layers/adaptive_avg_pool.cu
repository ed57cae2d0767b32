// Adaptive average pooling on the GPU with the CPU layer's sums (see
// adaptive_avg_pool.h): a thread per output averages its window in row-major
// order; backward gathers, a thread per input adding the shares of the
// windows that cover it in output order, as the CPU's scatter does.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/adaptive_avg_pool.h"

namespace poseidon {

namespace {

struct AdaptiveGeometry {
  int64_t planes, height, width, out_h, out_w;
};

// Window [begin, end) of output o when `in` inputs pool to `out`.
__device__ int64_t window_begin(int64_t o, int64_t in, int64_t out) { return o * in / out; }
__device__ int64_t window_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

__global__ void adaptive_avg_forward(const float* x, float* y, AdaptiveGeometry g) {
  const int64_t total = g.planes * g.out_h * g.out_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / (g.out_h * g.out_w), oy = i / g.out_w % g.out_h, ox = i % g.out_w;
    const float* plane = x + p * g.height * g.width;
    const int64_t y0 = window_begin(oy, g.height, g.out_h), y1 = window_end(oy, g.height, g.out_h);
    const int64_t x0 = window_begin(ox, g.width, g.out_w), x1 = window_end(ox, g.width, g.out_w);
    float sum = 0.f;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) sum += plane[iy * g.width + ix];
    y[i] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
  }
}

__global__ void adaptive_avg_backward(const float* dy, float* dx, AdaptiveGeometry g) {
  const int64_t total = g.planes * g.height * g.width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / (g.height * g.width), iy = i / g.width % g.height, ix = i % g.width;
    const float* grad = dy + p * g.out_h * g.out_w;
    float sum = dx[i];
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const int64_t y0 = window_begin(oy, g.height, g.out_h), y1 = window_end(oy, g.height, g.out_h);
      if (iy < y0 || iy >= y1) continue;
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const int64_t x0 = window_begin(ox, g.width, g.out_w), x1 = window_end(ox, g.width, g.out_w);
        if (ix < x0 || ix >= x1) continue;
        sum += grad[oy * g.out_w + ox] / static_cast<float>((y1 - y0) * (x1 - x0));
      }
    }
    dx[i] = sum;
  }
}

class AdaptiveAvgPoolCudaLayer : public AdaptiveAvgPoolLayer {
 public:
  using AdaptiveAvgPoolLayer::AdaptiveAvgPoolLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
    const AdaptiveGeometry g = geometry();
    const size_t outputs = g.planes * g.out_h * g.out_w;
    if (!outputs) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    adaptive_avg_forward<<<cuda::blocks_for(outputs), 256, 0, stream>>>(io.in[0]->data(), io.out[0]->data(), g);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.in_grad[0]) return;
    const AdaptiveGeometry g = geometry();
    const size_t inputs = g.planes * g.height * g.width;
    if (!inputs) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    adaptive_avg_backward<<<cuda::blocks_for(inputs), 256, 0, stream>>>(io.out_grad[0]->data(), io.in_grad[0]->data(),
                                                                        g);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  AdaptiveGeometry geometry() const {
    return {in_shape_[0] * in_shape_[1], in_shape_[2], in_shape_[3], out_[0], out_[1]};
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(AdaptiveAvgPoolCudaLayer, "adaptive_avg_pool");

}  // namespace poseidon
