// Softmax cross-entropy loss on the GPU with the CPU layer's arithmetic (see
// softmax_loss.h): a block per sample finds its maximum and, in double, its
// sum of exponentials and its loss; one thread then adds the per-sample
// losses in sample order. The labels are copied to the host once per
// forward, to reject bad ones with the CPU's error and to count the samples
// that backward divides by.
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/softmax_loss.h"

namespace poseidon {

namespace {

constexpr int kThreads = 128;
constexpr unsigned kFullWarp = 0xffffffffu;

struct MaxOf {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOf {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// Combines one value per thread of the block; every thread gets the result.
// `scratch` holds one value per warp.
template <class T, class Combine>
__device__ T block_all_reduce(T v, Combine combine, T* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v = combine(v, __shfl_xor_sync(kFullWarp, v, offset));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T all = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) all = combine(all, scratch[w]);
  __syncthreads();  // the scratch is written again by the next call
  return all;
}

// Which samples count: all, or those not labelled with the ignored label.
struct LabelFilter {
  bool has_ignore;
  float ignore;
  __device__ bool counted(float label) const { return !has_ignore || label != ignore; }
};

__global__ void softmax_loss_forward(const float* x, const float* labels, float* prob, double* sample_loss,
                                     int64_t batch, int64_t classes, LabelFilter filter) {
  __shared__ float max_scratch[kThreads / 32];
  __shared__ double sum_scratch[kThreads / 32];
  for (int64_t n = blockIdx.x; n < batch; n += gridDim.x) {
    const float* xn = x + n * classes;
    float* pn = prob + n * classes;
    float max = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += kThreads) max = fmaxf(max, xn[c]);
    max = block_all_reduce(max, MaxOf{}, max_scratch);
    double sum = 0;
    for (int64_t c = threadIdx.x; c < classes; c += kThreads) {
      pn[c] = expf(xn[c] - max);
      sum += pn[c];
    }
    sum = block_all_reduce(sum, SumOf{}, sum_scratch);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = threadIdx.x; c < classes; c += kThreads) pn[c] *= inv;
    if (threadIdx.x == 0) {
      const float label = labels[n];
      sample_loss[n] = filter.counted(label) ? log(sum) + max - xn[static_cast<int64_t>(label)] : 0.0;
    }
  }
}

// One thread: the sum in sample order, as the CPU's serial sum.
__global__ void mean_loss(const double* sample_loss, int64_t batch, int64_t count, float* loss) {
  double total = 0;
  for (int64_t n = 0; n < batch; ++n) total += sample_loss[n];
  *loss = static_cast<float>(total / count);
}

__global__ void softmax_loss_backward(const float* prob, const float* labels, const float* loss_grad, float* dx,
                                      int64_t batch, int64_t classes, int64_t count, LabelFilter filter) {
  const float scale = *loss_grad / static_cast<float>(count);
  const int64_t total = batch * classes;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const float label = labels[i / classes];
    if (!filter.counted(label)) continue;
    dx[i] += scale * (prob[i] - (i % classes == static_cast<int64_t>(label) ? 1.f : 0.f));
  }
}

class SoftmaxLossCudaLayer : public SoftmaxLossLayer {
 public:
  using SoftmaxLossLayer::SoftmaxLossLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const int64_t batch = prob_.dim(0), classes = prob_.dim(1);
    host_labels_.resize({batch});
    host_labels_.copy_from(*io.in[1]);
    count_ = 0;
    for (int64_t n = 0; n < batch; ++n) {
      check_label(host_labels_[n], n, classes);
      count_ += counted(host_labels_[n]);
    }
    if (device_prob_.device() != ctx.device) {
      device_prob_ = Tensor::on(ctx.device);
      device_sample_loss_ = Tensor::on(ctx.device);
    }
    device_prob_.resize({batch, classes});
    // N doubles in a float tensor's storage (the caching allocator's blocks
    // are aligned far beyond 8 bytes).
    device_sample_loss_.resize({2 * batch});
    double* sample_loss = reinterpret_cast<double*>(device_sample_loss_.data());
    POSEIDON_CHECK(reinterpret_cast<uintptr_t>(sample_loss) % alignof(double) == 0) << "misaligned loss scratch";
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (batch * classes > 0) {
      const unsigned blocks = static_cast<unsigned>(batch < 65535 * 16 ? batch : 65535 * 16);
      softmax_loss_forward<<<blocks, kThreads, 0, stream>>>(io.in[0]->data(), io.in[1]->data(), device_prob_.data(),
                                                            sample_loss, batch, classes, filter());
      POSEIDON_CUDA_CHECK_LAUNCH();
    }
    mean_loss<<<1, 1, 0, stream>>>(sample_loss, batch, count_, io.out[0]->data());
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.in_grad[0] || count_ == 0) return;
    const int64_t batch = device_prob_.dim(0), classes = device_prob_.dim(1);
    const size_t total = batch * classes;
    if (!total) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    softmax_loss_backward<<<cuda::blocks_for(total), 256, 0, stream>>>(device_prob_.data(), io.in[1]->data(),
                                                                       io.out_grad[0]->data(), io.in_grad[0]->data(),
                                                                       batch, classes, count_, filter());
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  LabelFilter filter() const { return {ignore_label_ != -1, static_cast<float>(ignore_label_)}; }

  Tensor host_labels_;         // the last forward's labels, on the host
  Tensor device_prob_;         // softmax of the last forward, [N, C], on the GPU
  Tensor device_sample_loss_;  // per-sample losses of the last forward, as doubles
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(SoftmaxLossCudaLayer, "softmax_loss");

}  // namespace poseidon
