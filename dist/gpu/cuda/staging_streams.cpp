// StagingStreams (dist/gpu/staging_streams.h) on a GPU: downloads on the context's
// device-to-host stream after an event of the compute stream, each closed by
// an event of its own (from a pool) that the host can wait on; uploads on the
// host-to-device stream, the compute stream waiting for them on the GPU.
#include "dist/gpu/staging_streams.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/device_memory.h"
#include "dist/gpu/page_ranges.h"

namespace poseidon::dist {

struct StagingStreams::State {
  int device = 0;
  cudaStream_t compute = nullptr, down = nullptr, up = nullptr;
  cudaEvent_t computed = nullptr;  // re-recorded before each download
  cudaEvent_t uploaded = nullptr;  // re-recorded after each upload
  std::mutex mutex;                // download() and wait() run on different threads
  std::vector<cudaEvent_t> spare;
  std::map<Ticket, cudaEvent_t> landing;
  Ticket next = 0;
  PageRanges pinned;  // by pin(), unregistered with this object
};

namespace {
cudaEvent_t new_event() {
  cudaEvent_t e = nullptr;
  // Blocking sync: a thread waiting for a download sleeps instead of spinning.
  POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync));
  return e;
}
}  // namespace

StagingStreams::StagingStreams(const Device& gpu) : state_(std::make_unique<State>()) {
  device_memory::require(gpu);
  cuda::Context& ctx = cuda::Context::get(gpu.index);
  state_->device = gpu.index;
  state_->compute = ctx.compute();
  state_->down = ctx.to_host();
  state_->up = ctx.to_device();
  state_->computed = new_event();
  state_->uploaded = new_event();
}

StagingStreams::~StagingStreams() {
  // Destructors do not throw: a failure here has already been reported by
  // the call that caused it.
  cudaSetDevice(state_->device);
  cudaStreamSynchronize(state_->down);
  cudaStreamSynchronize(state_->up);
  for (cudaEvent_t e : state_->spare) cudaEventDestroy(e);
  for (auto& [ticket, e] : state_->landing) cudaEventDestroy(e);
  cudaEventDestroy(state_->computed);
  cudaEventDestroy(state_->uploaded);
  for (const auto& [begin, end] : state_->pinned) cudaHostUnregister(reinterpret_cast<void*>(begin));
}

void StagingStreams::pin(void* host, size_t bytes) {
  if (!host || !bytes) return;
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const auto& [begin, end] : unpinned_pages(state_->pinned, reinterpret_cast<uintptr_t>(host), bytes, page)) {
    const cudaError_t status = cudaHostRegister(reinterpret_cast<void*>(begin), end - begin, cudaHostRegisterPortable);
    if (status == cudaErrorHostMemoryAlreadyRegistered) {
      cudaGetLastError();  // pinned by someone else, who unpins it
      continue;
    }
    POSEIDON_CUDA_CHECK(status);
    state_->pinned.emplace(begin, end);
  }
}

StagingStreams::Ticket StagingStreams::download(const std::vector<Copy>& copies) {
  State& s = *state_;
  POSEIDON_CUDA_CHECK(cudaEventRecord(s.computed, s.compute));
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(s.down, s.computed, 0));
  for (const Copy& c : copies)
    POSEIDON_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToHost, s.down));
  std::lock_guard lock(s.mutex);
  cudaEvent_t landed = nullptr;
  if (s.spare.empty()) {
    landed = new_event();
  } else {
    landed = s.spare.back();
    s.spare.pop_back();
  }
  POSEIDON_CUDA_CHECK(cudaEventRecord(landed, s.down));
  s.landing.emplace(s.next, landed);
  return s.next++;
}

void StagingStreams::wait(Ticket ticket) {
  State& s = *state_;
  cudaEvent_t landed = nullptr;
  {
    std::lock_guard lock(s.mutex);
    landed = s.landing.at(ticket);
  }
  POSEIDON_CUDA_CHECK(cudaSetDevice(s.device));
  POSEIDON_CUDA_CHECK(cudaEventSynchronize(landed));
  std::lock_guard lock(s.mutex);
  s.landing.erase(ticket);
  s.spare.push_back(landed);
}

void StagingStreams::upload(const std::vector<Copy>& copies) {
  State& s = *state_;
  if (copies.empty()) return;
  for (const Copy& c : copies)
    POSEIDON_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice, s.up));
  POSEIDON_CUDA_CHECK(cudaEventRecord(s.uploaded, s.up));
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(s.compute, s.uploaded, 0));
}

}  // namespace poseidon::dist
