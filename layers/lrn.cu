// Local response normalisation on the GPU: a thread per element sums its
// window across the channels (forward: squares of x; backward: dy * y / s),
// in the CPU's order. The backward adds into the input gradient like every
// layer's backward.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/registry.h"
#include "layers/lrn.h"

namespace poseidon {

namespace {

struct Window {
  int64_t channels, spatial, before, after;
  // Element i's channel, and the index of channel 0 at its position.
  __device__ int64_t channel(int64_t i) const { return (i / spatial) % channels; }
  __device__ int64_t base(int64_t i, int64_t c) const { return i - c * spatial; }
};

__global__ void lrn_forward(const float* x, float* y, float* scale, size_t n, Window win, float a, float k,
                            float beta) {
  for (size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x; t < n; t += size_t(gridDim.x) * blockDim.x) {
    const int64_t i = static_cast<int64_t>(t), c = win.channel(i), base = win.base(i, c);
    const int64_t first = max(int64_t(0), c - win.before), last = min(win.channels - 1, c + win.after);
    float sum = 0.f;
    for (int64_t w = first; w <= last; ++w) {
      const float v = x[base + w * win.spatial];
      sum += v * v;
    }
    const float s = k + a * sum;
    scale[i] = s;
    y[i] = x[i] / powf(s, beta);
  }
}

__global__ void lrn_backward(const float* x, const float* y, const float* dy, const float* scale, float* dx, size_t n,
                             Window win, float coef, float beta) {
  for (size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x; t < n; t += size_t(gridDim.x) * blockDim.x) {
    const int64_t i = static_cast<int64_t>(t), c = win.channel(i), base = win.base(i, c);
    // Channel c lies in the windows of channels c - after .. c + before.
    const int64_t first = max(int64_t(0), c - win.after), last = min(win.channels - 1, c + win.before);
    float sum = 0.f;
    for (int64_t w = first; w <= last; ++w) {
      const int64_t j = base + w * win.spatial;
      sum += dy[j] * y[j] / scale[j];
    }
    dx[i] += dy[i] / powf(scale[i], beta) - coef * x[i] * sum;
  }
}

class LrnCudaLayer : public LrnLayer {
 public:
  using LrnLayer::LrnLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const Tensor& x = *io.in[0];
    keep_scale(x, ctx.device);
    const size_t n = x.numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    lrn_forward<<<cuda::blocks_for(n), 256, 0, stream>>>(x.data(), io.out[0]->data(), scale_.data(), n, window(x),
                                                         alpha_ / static_cast<float>(size_), k_, beta_);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const Tensor& x = *io.in[0];
    const size_t n = x.numel();
    if (!io.in_grad[0] || !n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    lrn_backward<<<cuda::blocks_for(n), 256, 0, stream>>>(x.data(), io.out[0]->data(), io.out_grad[0]->data(),
                                                          scale_.data(), io.in_grad[0]->data(), n, window(x),
                                                          2.f * alpha_ * beta_ / static_cast<float>(size_), beta_);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  Window window(const Tensor& x) const {
    const Extent e = extent(x);
    return {e.channels, e.spatial, before(), after()};
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(LrnCudaLayer, "lrn");

}  // namespace poseidon
