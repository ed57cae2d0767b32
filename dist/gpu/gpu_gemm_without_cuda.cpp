// GpuGemm in a build without the CUDA backend: constructing one throws the
// build's "no CUDA" error (dist/gpu/cuda/gpu_gemm.cpp is the real one).
#include "dist/gpu/gpu_gemm.h"

#include "core/device_memory.h"

#ifndef POSEIDON_HAVE_CUDA

namespace poseidon::dist {

struct GpuGemm::State {};

GpuGemm::GpuGemm(const Device& gpu) { device_memory::require(Device::cuda(gpu.index)); }
GpuGemm::~GpuGemm() = default;
void GpuGemm::operator()(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*) {}

}  // namespace poseidon::dist

#endif
