// The allocation budget of the fuzz targets under a sanitizer (libFuzzer
// runs, and the corpus replay of the sanitizer build). It counts live heap
// bytes through the sanitizer's allocation hooks and is enforced in a
// replacement operator new; malloc-family calls above 32 MiB return null
// (ASan's max_allocation_size_mb), which Storage turns into std::bad_alloc.
#include "fuzz_support.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <new>

// The sanitizer runtime's allocator interface (declared here: clang ships
// <sanitizer/allocator_interface.h>, g++ does not, and the runtime of both has it).
extern "C" {
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                              void (*free_hook)(const volatile void*));
size_t __sanitizer_get_allocated_size(const volatile void* p);
}

extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1:max_allocation_size_mb=32"; }

namespace poseidon::fuzz {

namespace {
std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> byte_limit{std::numeric_limits<int64_t>::max()};

void count_malloc(const volatile void*, size_t size) { live_bytes.fetch_add(static_cast<int64_t>(size)); }
void count_free(const volatile void* ptr) {
  live_bytes.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(ptr))));
}

struct HookInstaller {
  HookInstaller() { __sanitizer_install_malloc_and_free_hooks(count_malloc, count_free); }
} install_hooks;

void* allocate(size_t size, size_t alignment) {
  if (live_bytes.load() + static_cast<int64_t>(size) > byte_limit.load()) return nullptr;
  size = size ? size : 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(size);
  void* p = nullptr;
  return ::posix_memalign(&p, alignment, size) == 0 ? p : nullptr;
}

void* allocate_or_throw(size_t size, size_t alignment) {
  void* p = allocate(size, alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

void release(void* p) { std::free(p); }

}  // namespace

AllocationBudget::AllocationBudget(int64_t bytes) { byte_limit.store(live_bytes.load() + bytes); }
AllocationBudget::~AllocationBudget() { byte_limit.store(std::numeric_limits<int64_t>::max()); }

}  // namespace poseidon::fuzz

using poseidon::fuzz::allocate;
using poseidon::fuzz::allocate_or_throw;
using poseidon::fuzz::release;

#include "../global_new_replacement.inc"
