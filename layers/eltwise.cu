// Eltwise on the GPU: a thread per element reads every input (their
// pointers travel in the kernel's arguments, so a GPU layer takes at most
// kMaxInputs inputs), in the CPU's order.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/registry.h"
#include "layers/eltwise.h"

namespace poseidon {

namespace {

constexpr int kMaxInputs = 32;

struct Inputs {
  const float* x[kMaxInputs];
  int count;
};

__global__ void eltwise_forward(Inputs in, float* y, size_t n, bool max) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float v = in.x[0][i];
    for (int k = 1; k < in.count; ++k) {
      const float xk = in.x[k][i];
      v = max ? (xk > v ? xk : v) : v * xk;
    }
    y[i] = v;
  }
}

// Adds input k's share of dy into dx (see eltwise.h).
__global__ void eltwise_backward(Inputs in, int k, const float* dy, float* dx, size_t n, bool max) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    if (max) {
      const float xk = in.x[k][i];
      bool wins = true;
      for (int j = 0; j < in.count && wins; ++j) wins = j < k ? in.x[j][i] < xk : j == k || in.x[j][i] <= xk;
      if (wins) dx[i] += dy[i];
    } else {
      float others = dy[i];
      for (int j = 0; j < in.count; ++j)
        if (j != k) others *= in.x[j][i];
      dx[i] += others;
    }
  }
}

class EltwiseCudaLayer : public EltwiseLayer {
 public:
  using EltwiseLayer::EltwiseLayer;

  std::pair<int, int> input_count() const override { return {2, kMaxInputs}; }

  void forward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    eltwise_forward<<<cuda::blocks_for(n), 256, 0, stream>>>(inputs(io), io.out[0]->data(), n, max_);
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    const size_t n = io.out_grad[0]->numel();
    if (!n) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    const Inputs in = inputs(io);
    for (int k = 0; k < in.count; ++k) {
      if (!io.in_grad[k]) continue;
      eltwise_backward<<<cuda::blocks_for(n), 256, 0, stream>>>(in, k, io.out_grad[0]->data(), io.in_grad[k]->data(), n,
                                                                max_);
      POSEIDON_CUDA_CHECK_LAUNCH();
    }
  }

 private:
  static Inputs inputs(const LayerIO& io) {
    Inputs in{};
    in.count = static_cast<int>(io.in.size());
    for (int k = 0; k < in.count; ++k) in.x[k] = io.in[k]->data();
    return in;
  }
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(EltwiseCudaLayer, "eltwise");

}  // namespace poseidon
