// Softmax cross-entropy loss on the GPU with the CPU layer's arithmetic (see
// softmax_loss.h): a block per sample finds its maximum and, in double, its
// sum of exponentials and its loss; one thread then adds the per-sample
// losses in sample order and counts the samples, which backward divides by
// on the device. The labels never leave the GPU: a label that is not a class
// index is noted there, and after_forward (once Net::forward has read the
// loss, so without a wait of its own) throws the CPU layer's error for it.
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/pinned_status.h"
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

// What forward found, read by the host after the loss.
struct LossStatus {
  long long count;                 // samples counted
  unsigned long long first_bad;    // first sample whose label is no class index, or ~0
  float bad_label;
};

__global__ void reset_status(LossStatus* status) { *status = {0, ~0ull, 0.f}; }

__device__ bool is_class(float label, int64_t classes) {
  return label >= 0.f && label < static_cast<float>(classes) && label == floorf(label);
}

__global__ void softmax_loss_forward(const float* x, const float* labels, float* prob, double* sample_loss,
                                     int64_t batch, int64_t classes, LabelFilter filter, LossStatus* status) {
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
      const bool counted = filter.counted(label);
      const bool valid = !counted || is_class(label, classes);
      if (!valid) atomicMin(&status->first_bad, static_cast<unsigned long long>(n));
      sample_loss[n] = counted && valid ? log(sum) + max - xn[static_cast<int64_t>(label)] : 0.0;
    }
  }
}

// One thread: the sum in sample order, as the CPU's serial sum, and the count.
__global__ void mean_loss(const double* sample_loss, const float* labels, int64_t batch, LabelFilter filter,
                          LossStatus* status, float* loss) {
  double total = 0;
  long long count = 0;
  for (int64_t n = 0; n < batch; ++n) {
    total += sample_loss[n];
    count += filter.counted(labels[n]);
  }
  status->count = count;
  if (status->first_bad != ~0ull) status->bad_label = labels[status->first_bad];
  // No counted sample gives 0 / 0 = NaN, as PyTorch.
  *loss = static_cast<float>(total / count);
}

__global__ void softmax_loss_backward(const float* prob, const float* labels, const float* loss_grad, float* dx,
                                      int64_t batch, int64_t classes, const LossStatus* status, LabelFilter filter) {
  if (status->count == 0) return;
  const float scale = *loss_grad / static_cast<float>(status->count);
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
    if (device_prob_.device() != ctx.device) {
      device_prob_ = Tensor::on(ctx.device);
      device_scratch_ = Tensor::on(ctx.device);
    }
    device_prob_.resize({batch, classes});
    // N doubles for the per-sample losses, then the status, in a float
    // tensor's storage (the caching allocator's blocks are aligned far
    // beyond 8 bytes).
    const int64_t status_floats = (sizeof(LossStatus) + sizeof(float) - 1) / sizeof(float);
    device_scratch_.resize({2 * batch + status_floats + 2});
    double* sample_loss = reinterpret_cast<double*>(device_scratch_.data());
    POSEIDON_CHECK(reinterpret_cast<uintptr_t>(sample_loss) % alignof(double) == 0) << "misaligned loss scratch";
    auto* status = reinterpret_cast<LossStatus*>(sample_loss + batch + 1);
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    reset_status<<<1, 1, 0, stream>>>(status);
    POSEIDON_CUDA_CHECK_LAUNCH();
    if (batch * classes > 0) {
      const unsigned blocks = static_cast<unsigned>(batch < int64_t(cuda::kMaxBlocks) ? batch : cuda::kMaxBlocks);
      softmax_loss_forward<<<blocks, kThreads, 0, stream>>>(io.in[0]->data(), io.in[1]->data(), device_prob_.data(),
                                                            sample_loss, batch, classes, filter(), status);
      POSEIDON_CUDA_CHECK_LAUNCH();
    }
    mean_loss<<<1, 1, 0, stream>>>(sample_loss, io.in[1]->data(), batch, filter(), status, io.out[0]->data());
    POSEIDON_CUDA_CHECK_LAUNCH();
    host_status_.fetch(status, stream);
    device_status_ = status;
    classes_ = classes;
  }

  void after_forward() override {
    const LossStatus* status = host_status_.take();
    if (!status) return;
    count_ = status->count;
    if (status->first_bad != ~0ull)
      check_label(status->bad_label, static_cast<int64_t>(status->first_bad), classes_);
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.in_grad[0] || !device_status_) return;
    const int64_t batch = device_prob_.dim(0), classes = device_prob_.dim(1);
    const size_t total = batch * classes;
    if (!total) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    softmax_loss_backward<<<cuda::blocks_for(total), 256, 0, stream>>>(device_prob_.data(), io.in[1]->data(),
                                                                       io.out_grad[0]->data(), io.in_grad[0]->data(),
                                                                       batch, classes, device_status_, filter());
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  LabelFilter filter() const { return {ignore_label_ != -1, static_cast<float>(ignore_label_)}; }

  Tensor device_prob_;     // softmax of the last forward, [N, C], on the GPU
  Tensor device_scratch_;  // per-sample losses (doubles) and the status of the last forward
  LossStatus* device_status_ = nullptr;
  cuda::PinnedStatus<LossStatus> host_status_;
  int64_t classes_ = 0;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(SoftmaxLossCudaLayer, "softmax_loss");

}  // namespace poseidon
