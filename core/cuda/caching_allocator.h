// Device memory that cudaMalloc never sees twice: freed blocks are kept per
// size class and handed out again, so after the first iteration a training
// step allocates nothing from the driver (cudaMalloc costs milliseconds, and
// cudaFree synchronises the whole device, other streams' kernels included).
//
// One stream: every block belongs to the device's compute stream, so a block
// released while kernels that use it are still queued may be handed to the
// next kernel queued behind them without further synchronisation. Work on
// another stream borrows blocks through Context::allocate_for and
// release_from, which order that stream against the compute stream.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace poseidon::cuda {

class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes);
  void release(void* ptr);
  // Returns every cached block to the driver (done automatically, then
  // retried, when cudaMalloc runs out of memory).
  void empty_cache();

  struct Stats {
    size_t driver_allocations = 0;  // cudaMalloc calls so far
    size_t bytes_in_use = 0;
    size_t bytes_cached = 0;        // free blocks held for reuse
  };
  Stats stats() const;

  // Size classes: 512-byte steps up to 1 MiB, 2 MiB steps above.
  static size_t round_size(size_t bytes);

 private:
  int device_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;        // size class -> block
  std::unordered_map<void*, size_t> in_use_;  // block -> size class
  Stats stats_;
};

}  // namespace poseidon::cuda
