// Accuracy on the GPU with the CPU layer's rule (see accuracy.h): a block per
// sample counts the classes that score strictly higher than the label's, a
// hit when fewer than top_k do; one thread then writes hits / N. The inputs
// stay on the GPU: a label that is not a class index is noted there and
// reported by after_forward with the CPU layer's error, once the host has
// waited for the device anyway (Net::forward reading the loss).
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/pinned_status.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/accuracy.h"

namespace poseidon {

namespace {

constexpr int kThreads = 128;

struct AccuracyStatus {
  unsigned long long hits;
  unsigned long long first_bad;  // first sample whose label is no class index, or ~0
  float bad_label;
};

__global__ void reset_status(AccuracyStatus* status) { *status = {0, ~0ull, 0.f}; }

__global__ void count_hits(const float* x, const float* labels, int64_t batch, int64_t classes, int64_t top_k,
                           AccuracyStatus* status) {
  __shared__ long long higher_per_thread[kThreads];
  for (int64_t n = blockIdx.x; n < batch; n += gridDim.x) {
    const float label = labels[n];
    const bool valid = label >= 0.f && label < static_cast<float>(classes) && label == floorf(label);
    if (!valid) {
      if (threadIdx.x == 0) atomicMin(&status->first_bad, static_cast<unsigned long long>(n));
      continue;  // the same for every thread of the block
    }
    const float* xn = x + n * classes;
    const float target = xn[static_cast<int64_t>(label)];
    long long higher = 0;
    for (int64_t c = threadIdx.x; c < classes; c += kThreads) higher += xn[c] > target;
    higher_per_thread[threadIdx.x] = higher;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) higher_per_thread[threadIdx.x] += higher_per_thread[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0 && higher_per_thread[0] < top_k) atomicAdd(&status->hits, 1ull);
    __syncthreads();  // before the scratch is written again
  }
}

__global__ void write_accuracy(const float* labels, int64_t batch, AccuracyStatus* status, float* out) {
  if (status->first_bad != ~0ull) status->bad_label = labels[status->first_bad];
  *out = static_cast<float>(static_cast<double>(status->hits) / batch);
}

class AccuracyCudaLayer : public AccuracyLayer {
 public:
  using AccuracyLayer::AccuracyLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    const int64_t batch = io.in[0]->dim(0), classes = io.in[0]->dim(1);
    if (device_status_.device() != ctx.device) device_status_ = Tensor::on(ctx.device);
    device_status_.resize({static_cast<int64_t>((sizeof(AccuracyStatus) + sizeof(float) - 1) / sizeof(float))});
    auto* status = reinterpret_cast<AccuracyStatus*>(device_status_.data());
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    reset_status<<<1, 1, 0, stream>>>(status);
    POSEIDON_CUDA_CHECK_LAUNCH();
    if (batch > 0) {
      const unsigned blocks = static_cast<unsigned>(batch < int64_t(cuda::kMaxBlocks) ? batch : cuda::kMaxBlocks);
      count_hits<<<blocks, kThreads, 0, stream>>>(io.in[0]->data(), io.in[1]->data(), batch, classes, top_k(),
                                                  status);
      POSEIDON_CUDA_CHECK_LAUNCH();
    }
    write_accuracy<<<1, 1, 0, stream>>>(io.in[1]->data(), batch, status, io.out[0]->data());
    POSEIDON_CUDA_CHECK_LAUNCH();
    host_status_.fetch(status, stream);
    classes_ = classes;
  }

  void after_forward() override {
    const AccuracyStatus* status = host_status_.take();
    if (status && status->first_bad != ~0ull)
      check_label(status->bad_label, static_cast<int64_t>(status->first_bad), classes_);
  }

 private:
  Tensor device_status_;
  cuda::PinnedStatus<AccuracyStatus> host_status_;
  int64_t classes_ = 0;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(AccuracyCudaLayer, "accuracy");

}  // namespace poseidon
