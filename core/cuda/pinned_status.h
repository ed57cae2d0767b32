// A small struct that kernels write on the GPU, brought back to the host
// without a wait of its own: copied into pinned memory on the stream behind
// the kernels, and read once the host has waited for that stream anyway (the
// loss and accuracy layers' label checks, read after Net::forward has read
// the loss).
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/check.h"

namespace poseidon::cuda {

template <class T>
class PinnedStatus {
 public:
  PinnedStatus() = default;
  ~PinnedStatus() {
    // Destructors do not throw; a failure here was reported by earlier calls.
    if (landed_) cudaEventDestroy(landed_);
    if (host_) cudaFreeHost(host_);
  }
  PinnedStatus(const PinnedStatus&) = delete;
  PinnedStatus& operator=(const PinnedStatus&) = delete;

  // Queues the copy of *device behind the work queued on `stream` so far.
  void fetch(const T* device, cudaStream_t stream) {
    if (!host_) {
      POSEIDON_CUDA_CHECK(cudaMallocHost(&host_, sizeof(T)));
      POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&landed_, cudaEventDisableTiming));
    }
    POSEIDON_CUDA_CHECK(cudaMemcpyAsync(host_, device, sizeof(T), cudaMemcpyDeviceToHost, stream));
    POSEIDON_CUDA_CHECK(cudaEventRecord(landed_, stream));
    pending_ = true;
  }

  // The last fetched value (waiting for it if it has not landed), once per
  // fetch; null when nothing was fetched since.
  const T* take() {
    if (!pending_) return nullptr;
    pending_ = false;
    POSEIDON_CUDA_CHECK(cudaEventSynchronize(landed_));
    return host_;
  }

 private:
  T* host_ = nullptr;
  cudaEvent_t landed_ = nullptr;  // the copy has reached host_
  bool pending_ = false;
};

}  // namespace poseidon::cuda
