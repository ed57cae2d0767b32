// GpuAllReduce in a build without the CUDA backend: constructing one throws
// the build's "no CUDA" error (dist/gpu/cuda/gpu_allreduce.cpp is the real one).
#include "dist/gpu/gpu_allreduce.h"

#include "core/device_memory.h"

#ifndef POSEIDON_HAVE_CUDA

namespace poseidon::dist {

struct GpuAllReduce::State {};

std::vector<char> GpuAllReduce::unique_id() {
  device_memory::require(Device::cuda(0));
  return {};
}

std::string GpuAllReduce::gpu_identity(const Device& gpu) {
  device_memory::require(gpu);
  return {};
}

GpuAllReduce::GpuAllReduce(const Device& gpu, const std::vector<char>&, int, int) {
  device_memory::require(Device::cuda(gpu.index));
}
GpuAllReduce::~GpuAllReduce() = default;
std::function<bool()> GpuAllReduce::sum_to_host(float*, float*, size_t) { return [] { return true; }; }
void GpuAllReduce::mark_gradients_queued() {}
uint16_t* GpuAllReduce::wire_buffer(size_t) { return nullptr; }
std::function<bool()> GpuAllReduce::mean_in_place(float*, size_t, uint16_t*) { return [] { return true; }; }

}  // namespace poseidon::dist

#endif
