// StagingStreams in a build without the CUDA backend: there is no GPU to
// stage from, so constructing one throws the build's "no CUDA" error
// (dist/gpu/cuda/staging_streams.cpp is the real one).
#include "dist/gpu/staging_streams.h"

#include "core/device_memory.h"

#ifndef POSEIDON_HAVE_CUDA

namespace poseidon::dist {

struct StagingStreams::State {};

StagingStreams::StagingStreams(const Device& gpu) { device_memory::require(Device::cuda(gpu.index)); }
StagingStreams::~StagingStreams() = default;
void StagingStreams::pin(void*, size_t) {}
StagingStreams::Ticket StagingStreams::download(const std::vector<Copy>&) { return 0; }
void StagingStreams::wait(Ticket) {}
void StagingStreams::upload(const std::vector<Copy>&) {}

}  // namespace poseidon::dist

#endif
