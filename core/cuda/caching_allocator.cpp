// Size-class caching of device blocks (see caching_allocator.h).
#include "core/cuda/caching_allocator.h"

#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/error.h"

namespace poseidon::cuda {

namespace {
constexpr size_t kSmallStep = 512;
constexpr size_t kLargeStep = 2 << 20;
constexpr size_t kSmallLimit = 1 << 20;
}  // namespace

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t step = bytes <= kSmallLimit ? kSmallStep : kLargeStep;
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  // The process may be exiting with the driver already torn down: errors
  // here are not worth an exception from a destructor.
  for (auto& [size, ptr] : free_) cudaFree(ptr);
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard lock(mutex_);
  // A cached block of the same class, or a larger one of at most twice the
  // size (wasting less than half of it).
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    void* ptr = it->second;
    in_use_[ptr] = it->first;
    stats_.bytes_cached -= it->first;
    stats_.bytes_in_use += it->first;
    free_.erase(it);
    return ptr;
  }
  POSEIDON_CUDA_CHECK(cudaSetDevice(device_));
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, size);
  if (status == cudaErrorMemoryAllocation && !free_.empty()) {
    cudaGetLastError();  // clear the sticky-free error state of the failed call
    for (auto& [s, p] : free_) POSEIDON_CUDA_CHECK(cudaFree(p));
    free_.clear();
    stats_.bytes_cached = 0;
    status = cudaMalloc(&ptr, size);
  }
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw Error("out of GPU memory on cuda:" + std::to_string(device_) + ": could not allocate " +
                std::to_string(size >> 20) + " MiB with " + std::to_string(stats_.bytes_in_use >> 20) +
                " MiB in use (a smaller batch size needs less)");
  }
  POSEIDON_CUDA_CHECK(status);
  ++stats_.driver_allocations;
  stats_.bytes_in_use += size;
  in_use_[ptr] = size;
  return ptr;
}

void CachingAllocator::release(void* ptr) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = in_use_.find(ptr);
  POSEIDON_CHECK(it != in_use_.end()) << "releasing a block this allocator does not hold";
  free_.emplace(it->second, ptr);
  stats_.bytes_in_use -= it->second;
  stats_.bytes_cached += it->second;
  in_use_.erase(it);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  POSEIDON_CUDA_CHECK(cudaSetDevice(device_));
  for (auto& [size, ptr] : free_) POSEIDON_CUDA_CHECK(cudaFree(ptr));
  free_.clear();
  stats_.bytes_cached = 0;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace poseidon::cuda
