// Feeding a GPU without waiting for it: input batches through pinned double
// buffers on the device's host-to-device stream (Uploader), and the figures
// tests count to show that a steady-state training step makes no host wait
// and no allocation (device_counts). Implemented beside the memory seam
// (core/cuda/device_memory.cpp; a build without CUDA refuses them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace poseidon::device_memory {

// What the engine did on one GPU so far: the times it waited for all the
// work queued on a stream (a synchronisation, a copy to host memory, a copy
// from pageable host memory; waiting for an earlier step's pinned copies,
// behind which later work is queued, is not one: the GPU keeps working),
// its requests for GPU memory (tensors, cached blocks included), and the
// caching allocator's calls to cudaMalloc.
struct DeviceCounts {
  int64_t host_waits = 0;
  int64_t allocations = 0;
  int64_t driver_allocations = 0;
};
DeviceCounts device_counts(const Device& device);

// Host batches to a GPU through two pinned buffers: upload() copies the
// host data into the next pinned buffer and queues, on the device's
// host-to-device stream, its copy into a device buffer of its own, which the
// compute stream waits for and copies into `dst` (ordered there like any
// kernel). The host does not wait for the work queued before it (only for
// the copy from the same pinned buffer two uploads ago), and the transfer
// runs beside the step the compute stream is still working on. One Uploader
// per input tensor.
class Uploader {
 public:
  explicit Uploader(const Device& device);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;
  void upload(float* dst, const float* src, size_t count);

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace poseidon::device_memory
