// A small struct that kernels write on the GPU, brought back to the host
// without a wait of its own: copied into pinned memory on the stream behind
// the kernels, and read once the host has waited for that stream anyway (the
// loss and accuracy layers' label checks, read after Net::forward has read
// the loss). Two copies can be in flight, so that a trainer may issue the
// next forward before it reads the previous one's (Net::check_forward).
// The copy is never part of a captured step's graph: it follows the launch.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/step_recording.h"

namespace poseidon::cuda {

template <class T>
class PinnedStatus {
 public:
  PinnedStatus() = default;
  ~PinnedStatus() {
    // Destructors do not throw; a failure here was reported by earlier calls.
    for (Slot& s : slots_) {
      if (s.landed) cudaEventDestroy(s.landed);
      if (s.host) cudaFreeHost(s.host);
    }
  }
  PinnedStatus(const PinnedStatus&) = delete;
  PinnedStatus& operator=(const PinnedStatus&) = delete;

  // Queues the copy of *device behind the work queued on `stream` so far.
  // With two copies not yet taken, the older is dropped. While a step is
  // captured (core/step_recording.h) the copy is queued after each launch
  // of the graph instead, outside it.
  void fetch(const T* device, cudaStream_t stream) {
    if (StepRecording* recording = StepRecording::active()) {
      recording->after_launch([this, device, stream] { fetch(device, stream); });
      return;
    }
    Slot& s = slots_[next_];
    if (!s.host) {
      POSEIDON_CUDA_CHECK(cudaMallocHost(&s.host, sizeof(T)));
      POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&s.landed, cudaEventDisableTiming));
    }
    POSEIDON_CUDA_CHECK(cudaMemcpyAsync(s.host, device, sizeof(T), cudaMemcpyDeviceToHost, stream));
    POSEIDON_CUDA_CHECK(cudaEventRecord(s.landed, stream));
    if (s.pending) oldest_ = 1 - next_;  // the dropped copy was the oldest: the other one is now
    s.pending = true;
    if (!slots_[1 - next_].pending) oldest_ = next_;
    next_ = 1 - next_;
  }

  // The oldest fetched value not yet taken (waiting for it if it has not
  // landed), once per fetch; null when every fetch was taken.
  const T* take() {
    Slot& s = slots_[oldest_];
    if (!s.pending) return nullptr;
    s.pending = false;
    oldest_ = 1 - oldest_;
    POSEIDON_CUDA_CHECK(cudaEventSynchronize(s.landed));
    return s.host;
  }

 private:
  struct Slot {
    T* host = nullptr;
    cudaEvent_t landed = nullptr;  // the copy has reached host
    bool pending = false;
  };
  Slot slots_[2];
  int next_ = 0;    // the slot the next fetch fills
  int oldest_ = 0;  // the slot take reads
};

}  // namespace poseidon::cuda
