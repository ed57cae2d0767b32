// One GPU's working set, created on first use and kept for the process: the
// compute stream every layer kernel runs on, two copy streams (device to
// host and host to device) for staging gradients and parameters while the
// compute stream goes on, the cuBLAS and cuDNN handles bound to the compute
// stream, a bounded cuDNN workspace, and the caching allocator.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>

#include "core/cuda/caching_allocator.h"

namespace poseidon::cuda {

class Context {
 public:
  // The context of GPU `device`; also makes it the calling thread's device.
  static Context& get(int device);

  int device() const { return device_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t to_host() const { return to_host_; }
  cudaStream_t to_device() const { return to_device_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  CachingAllocator& allocator() { return allocator_; }

  // The largest workspace a cuDNN algorithm may use; algorithms that need
  // more are not chosen.
  static constexpr size_t kWorkspaceLimit = size_t(512) << 20;
  // Scratch of at least `bytes` (<= kWorkspaceLimit) for work queued on the
  // compute stream; valid until the next call.
  void* workspace(size_t bytes);

  // TF32 tensor-core math for FP32 GEMMs and convolutions: off, so that GPU
  // results match the CPU's to 1e-4 (POSEIDON_TF32=1 turns it on).
  bool tf32() const { return tf32_; }

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  explicit Context(int device);
  int device_;
  cudaStream_t compute_ = nullptr, to_host_ = nullptr, to_device_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  CachingAllocator allocator_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool tf32_ = false;
};

// Kernel launch shape for an element-wise loop over n items (grid-stride).
inline unsigned blocks_for(size_t n, unsigned threads = 256) {
  size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

}  // namespace poseidon::cuda
