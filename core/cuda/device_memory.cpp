// The memory seam (core/device_memory.h) in a build with the CUDA backend:
// host memory as always, GPU memory through each device's caching
// allocator, with fills and copies ordered on its compute stream.
#include "core/device_memory.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/kernels.h"
#include "core/error.h"

namespace poseidon::device_memory {

namespace {
// Queried once: the answer does not change while the process runs.
struct Availability {
  int count = 0;
  std::string reason;
};

const Availability& availability() {
  static const Availability a = [] {
    Availability r;
    int n = 0;
    cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
      cudaGetLastError();
      r.reason = std::string("no usable GPU: ") + cudaGetErrorString(status);
    } else if (n == 0) {
      r.reason = "no GPU is visible (CUDA_VISIBLE_DEVICES?)";
    }
    r.count = status == cudaSuccess ? n : 0;
    return r;
  }();
  return a;
}
}  // namespace

bool cuda_built() { return true; }
int cuda_device_count() { return availability().count; }
std::string cuda_unavailable_reason() { return availability().reason; }

void require(const Device& device) {
  if (!device.is_cuda()) return;
  if (cuda_device_count() == 0) throw Error("device " + device.str() + ": " + cuda_unavailable_reason());
  if (device.index >= cuda_device_count())
    throw Error("device " + device.str() + " does not exist: " + std::to_string(cuda_device_count()) +
                " GPU(s) visible");
}

void* allocate(const Device& device, size_t bytes) {
  if (!device.is_cuda()) return host_allocate(bytes);
  require(device);
  auto& ctx = cuda::Context::get(device.index);
  void* ptr = ctx.allocator().allocate(bytes);
  // Reused blocks hold old contents; new tensors start at zero like on the host.
  POSEIDON_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, ctx.compute()));
  return ptr;
}

void release(const Device& device, void* ptr, size_t bytes) {
  if (!device.is_cuda()) {
    std::free(ptr);
    return;
  }
  cuda::Context::get(device.index).allocator().release(ptr);
}

void fill(const Device& device, float* ptr, size_t count, float value) {
  if (!device.is_cuda()) {
    std::fill(ptr, ptr + count, value);
    return;
  }
  cuda::fill(ptr, count, value, cuda::Context::get(device.index).compute());
}

void copy(float* dst, const Device& dst_device, const float* src, const Device& src_device, size_t count) {
  if (!count) return;
  if (!dst_device.is_cuda() && !src_device.is_cuda()) {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  // Unified addressing lets the runtime tell the direction; the work is
  // ordered on the compute stream of the GPU involved (the source's for
  // device-to-device copies).
  const Device& gpu = src_device.is_cuda() ? src_device : dst_device;
  cudaStream_t stream = cuda::Context::get(gpu.index).compute();
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDefault, stream));
  // A copy to the host must be complete before the host reads it. A copy
  // from (pageable) host memory has taken its source into the driver's
  // own bounce buffer when the call returns, so the host need not wait for it.
  if (!dst_device.is_cuda()) POSEIDON_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void synchronize(const Device& device) {
  if (device.is_cuda()) POSEIDON_CUDA_CHECK(cudaStreamSynchronize(cuda::Context::get(device.index).compute()));
}

void set_tf32(const Device& device, bool on) {
  POSEIDON_REQUIRE(device.is_cuda()) << "TF32 is GPU math; device " << device.str() << " has none";
  cuda::Context::get(device.index).set_tf32(on);
}

}  // namespace poseidon::device_memory

namespace poseidon::device_memory {

void gpu_solver_update(const Device& device, const UpdateStep& step, float* value, const float* grad, float* state,
                       size_t count) {
  cuda::solver_update(step, value, grad, state, count, cuda::Context::get(device.index).compute());
}

void gpu_update_group(const Device& device, const UpdateGroup& group) {
  cuda::update_group(group, cuda::Context::get(device.index).compute());
}

void set_deterministic(const Device& device, bool on) {
  if (device.is_cuda()) cuda::Context::get(device.index).set_deterministic(on);
}

int64_t gpu_first_non_finite(const Device& device, const float* ptr, size_t count) {
  return cuda::first_non_finite(ptr, count, cuda::Context::get(device.index).compute());
}

}  // namespace poseidon::device_memory
