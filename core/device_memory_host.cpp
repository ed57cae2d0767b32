// Host memory for every build, and the answers of a build without the CUDA
// backend (core/cuda/device_memory.cpp replaces the latter when it is built).
#include "core/device_memory.h"
#include "core/device_pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/bf16.h"
#include "core/blob_types.h"
#include "core/error.h"

namespace poseidon::device_memory {

void* host_allocate(size_t bytes) {
  size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}

void copy(float* dst, const Device& dst_device, const float* src, const Device& src_device, size_t count) {
  copy_bytes(dst, dst_device, src, src_device, count * sizeof(float));
}

void round_to_bf16(const Device& device, uint16_t* dst, const float* src, size_t count) {
  if (device.is_cuda()) return gpu_round_to_bf16(device, dst, src, count);
  const int64_t n = static_cast<int64_t>(count);
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void widen_bf16(const Device& device, float* dst, const uint16_t* src, size_t count) {
  if (device.is_cuda()) return gpu_widen_bf16(device, dst, src, count);
  const int64_t n = static_cast<int64_t>(count);
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
}

void add_rounded_into_bf16(const Device& device, uint16_t* dst, const float* src, size_t count) {
  if (device.is_cuda()) return gpu_add_rounded_into_bf16(device, dst, src, count);
  poseidon::add_rounded_into_bf16(src, dst, static_cast<int64_t>(count));
}

std::string missing_backend_reason(const std::string& configured) {
  if (configured == "OFF") return "this build has no CUDA backend (configured with -DPOSEIDON_CUDA=OFF)";
  return "this build has no CUDA backend (nvcc was not found at configure time)";
}

#ifndef POSEIDON_HAVE_CUDA

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return missing_backend_reason(POSEIDON_CUDA_CONFIGURED); }

void require(const Device& device) {
  if (device.is_cuda()) throw Error("device " + device.str() + ": " + cuda_unavailable_reason() + "; use device: cpu");
}

void* allocate(const Device& device, size_t bytes) {
  require(device);
  return host_allocate(bytes);
}

void release(const Device& device, void* ptr, size_t bytes) { std::free(ptr); }

void fill(const Device& device, float* ptr, size_t count, float value) {
  require(device);
  std::fill(ptr, ptr + count, value);
}

void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, size_t bytes) {
  require(dst_device);
  require(src_device);
  if (bytes) std::memcpy(dst, src, bytes);
}

void synchronize(const Device& device) {}

void set_tf32(const Device& device, bool) {
  require(device);
  throw Error("TF32 is GPU math; device " + device.str() + " has none");
}

void set_deterministic(const Device& device, bool) { require(device); }

void gpu_fill_bf16(const Device& device, uint16_t*, size_t, uint16_t) { require(Device::cuda(device.index)); }
void gpu_round_to_bf16(const Device& device, uint16_t*, const float*, size_t) { require(Device::cuda(device.index)); }
void gpu_widen_bf16(const Device& device, float*, const uint16_t*, size_t) { require(Device::cuda(device.index)); }
void gpu_add_rounded_into_bf16(const Device& device, uint16_t*, const float*, size_t) {
  require(Device::cuda(device.index));
}

void gpu_solver_update(const Device& device, const UpdateStep&, float*, const float*, float*, size_t) {
  require(Device::cuda(device.index));
}

struct StepUpload::Slots {};
StepUpload::StepUpload(const Device& device, size_t bytes) : device_(device), bytes_(bytes) {
  require(Device::cuda(device.index));
}
StepUpload::~StepUpload() = default;
void* StepUpload::next_slot() { return nullptr; }
void StepUpload::send_slot(size_t) {}
void StepUpload::send(const void*, size_t, Refill) {}
size_t StepUpload::slot_count() const { return 0; }
const void* StepUpload::target() const { return nullptr; }
void gpu_update_table(StepUpload& upload, const UpdateSlice*, int, const float*, StepUpload::Refill) {
  require(Device::cuda(upload.device().index));
}

void gpu_gate_scan(const Device& device, const GateScan&, float*) { require(Device::cuda(device.index)); }

DeviceCounts device_counts(const Device& device) {
  require(Device::cuda(device.index));
  return {};
}

struct Uploader::Buffers {};
Uploader::Uploader(const Device& device) { require(Device::cuda(device.index)); }
Uploader::~Uploader() = default;
void Uploader::upload(float*, const float*, size_t) {}

struct Readback::Slots {};
Readback::Readback(const Device& device, int, size_t) { require(Device::cuda(device.index)); }
Readback::~Readback() = default;
void Readback::fetch(int, const float*) {}
const float* Readback::read(int) { return nullptr; }

int64_t gpu_first_non_finite(const Device& device, const float*, size_t) {
  require(Device::cuda(device.index));
  return -1;
}

#endif

}  // namespace poseidon::device_memory
