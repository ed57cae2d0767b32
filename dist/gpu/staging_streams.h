// Asynchronous copies between one GPU and pinned host memory on the GPU's
// two copy streams (core/cuda/context.h), ordered against its compute stream
// by CUDA events, for the host staging of distribution
// (dist/gpu/host_staging_sink.h): a gradient goes down once the compute stream
// has produced it, without the host waiting for that; parameters go up on
// their own stream, and the compute stream's later kernels wait for them on
// the GPU (cudaStreamWaitEvent), the host never. In a build without the CUDA
// backend constructing one throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"

namespace poseidon::dist {

class StagingStreams {
 public:
  struct Copy {  // `bytes` bytes of any element type
    void* dst;
    const void* src;
    size_t bytes;
  };
  // The copies of one download, done when wait() returns for its ticket.
  using Ticket = uint64_t;

  explicit StagingStreams(const Device& gpu);
  ~StagingStreams();
  StagingStreams(const StagingStreams&) = delete;
  StagingStreams& operator=(const StagingStreams&) = delete;

  // Pins host memory until this object goes, so copies to and from it run
  // asynchronously (pageable memory would make each copy wait): the pages it
  // touches that no earlier call pinned (dist/gpu/page_ranges.h).
  void pin(void* host, size_t bytes);
  // Queues `copies` (GPU to host) after everything queued on the compute
  // stream so far (a CUDA event: the gradient is ready); returns at once.
  Ticket download(const std::vector<Copy>& copies);
  // Blocks the calling thread until the download's copies have landed.
  void wait(Ticket ticket);
  // Queues `copies` (host to GPU) on the upload stream, and makes every
  // kernel queued on the compute stream from now on wait for them.
  void upload(const std::vector<Copy>& copies);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace poseidon::dist
