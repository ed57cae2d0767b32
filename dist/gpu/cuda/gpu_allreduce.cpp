// GpuAllReduce (dist/gpu/gpu_allreduce.h) with NCCL: ncclAllReduce in place on the
// communicator's stream, then either the copy to the host or the scaling
// into a mean behind it on the same stream, and an event after them that the
// communication thread queries. A mean waits on the GPU for the event the
// compute stream recorded when its gradients were queued.
#include "dist/gpu/gpu_allreduce.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "core/cuda/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/device_info.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "dist/gpu/cuda/mean_scale.h"

// An NCCL call that fails throws, as core/cuda/check.h does for CUDA's.
#define POSEIDON_NCCL_CHECK(call)                                                                      \
  do {                                                                                                 \
    ncclResult_t poseidon_status_ = (call);                                                            \
    if (poseidon_status_ != ncclSuccess)                                                               \
      ::poseidon::cuda::fail("NCCL", #call, __FILE__, __LINE__, ncclGetErrorString(poseidon_status_)); \
  } while (0)

namespace poseidon::dist {

namespace {
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L writes it.
std::string uuid_text(const unsigned char* bytes) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[bytes[i] >> 4];
    s += hex[bytes[i] & 15];
  }
  return s;
}

// NCCL 2 encodes 10000 * major + 100 * minor + patch.
std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "none";
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}
// `poseidon info` lists NCCL beside the engine's CUDA libraries.
[[maybe_unused]] const bool nccl_reported = (device_info::report_library("NCCL", nccl_version), true);
}  // namespace

struct GpuAllReduce::State {
  int device = 0;
  int ranks = 1;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  cudaEvent_t gradients = nullptr;  // recorded on the compute stream by mark_gradients_queued
  uint16_t* wire = nullptr;         // the bf16 wire's buffer
  size_t wire_count = 0;

  // An event recorded on the stream now, as a test of whether it has passed.
  std::function<bool()> landed_test() const;
};

std::function<bool()> GpuAllReduce::State::landed_test() const {
  cudaEvent_t landed = nullptr;
  POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&landed, cudaEventDisableTiming));
  POSEIDON_CUDA_CHECK(cudaEventRecord(landed, stream));
  auto event = std::shared_ptr<CUevent_st>(landed, [](cudaEvent_t e) { cudaEventDestroy(e); });
  return [event, comm = comm] {
    const cudaError_t status = cudaEventQuery(event.get());
    if (status == cudaErrorNotReady) {
      // Not an error, but the runtime keeps it as the last error, where the
      // next launch check (cudaGetLastError) would take it for its own.
      cudaGetLastError();
      // NCCL's own failure (a peer's connection lost) would otherwise show
      // only as a sum that never lands, until the stall check's timeout.
      ncclResult_t async = ncclSuccess;
      POSEIDON_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
      if (async != ncclSuccess && async != ncclInProgress)
        cuda::fail("NCCL", "the communicator, while a sum was pending (ncclCommGetAsyncError)", __FILE__, __LINE__,
                   ncclGetErrorString(async));
      return false;
    }
    POSEIDON_CUDA_CHECK(status);
    return true;
  };
}

std::vector<char> GpuAllReduce::unique_id() {
  ncclUniqueId id;
  POSEIDON_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::vector<char>(id.internal, id.internal + sizeof(id.internal));
}

std::string GpuAllReduce::gpu_identity(const Device& gpu) {
  device_memory::require(gpu);
  cudaDeviceProp prop{};
  POSEIDON_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu.index));
  return uuid_text(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
}

GpuAllReduce::GpuAllReduce(const Device& gpu, const std::vector<char>& id, int ranks, int rank)
    : state_(std::make_unique<State>()) {
  device_memory::require(gpu);
  ncclUniqueId nccl_id;
  POSEIDON_CHECK(id.size() == sizeof(nccl_id.internal)) << "an NCCL id of " << id.size() << " bytes";
  std::memcpy(nccl_id.internal, id.data(), id.size());
  cuda::Context::get(gpu.index);  // makes it this thread's device
  state_->device = gpu.index;
  state_->ranks = ranks;
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&state_->gradients, cudaEventDisableTiming));
  POSEIDON_NCCL_CHECK(ncclCommInitRank(&state_->comm, ranks, nccl_id, rank));
}

GpuAllReduce::~GpuAllReduce() {
  cudaSetDevice(state_->device);
  // A sum still queued (a run ended by an error) may wait for peers that
  // never join it, and finalizing would wait with it: the communicator is
  // aborted then, its queued work with it.
  ncclResult_t async = ncclSuccess;
  const bool failed = ncclCommGetAsyncError(state_->comm, &async) != ncclSuccess || async != ncclSuccess;
  const bool idle = cudaStreamQuery(state_->stream) == cudaSuccess;
  cudaGetLastError();  // a busy stream's "not ready" is no error of anyone's
  if (idle && !failed) {
    ncclCommDestroy(state_->comm);
  } else {
    ncclCommAbort(state_->comm);
    cudaStreamSynchronize(state_->stream);
  }
  cudaEventDestroy(state_->gradients);
  if (state_->wire) cudaFree(state_->wire);
  cudaStreamDestroy(state_->stream);
}

std::function<bool()> GpuAllReduce::sum_to_host(float* gpu, float* host, size_t count) {
  State& s = *state_;
  POSEIDON_CUDA_CHECK(cudaSetDevice(s.device));
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.gradients, 0));
  POSEIDON_NCCL_CHECK(ncclAllReduce(gpu, gpu, count, ncclFloat, ncclSum, s.comm, s.stream));
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(host, gpu, count * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
  return s.landed_test();
}

void GpuAllReduce::mark_gradients_queued() {
  State& s = *state_;
  POSEIDON_CUDA_CHECK(cudaEventRecord(s.gradients, cuda::Context::get(s.device).compute()));
}

uint16_t* GpuAllReduce::wire_buffer(size_t count) {
  State& s = *state_;
  if (count <= s.wire_count) return s.wire;
  POSEIDON_CUDA_CHECK(cudaSetDevice(s.device));
  // Before the first mean: nothing queued reads the old buffer yet.
  POSEIDON_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  if (s.wire) POSEIDON_CUDA_CHECK(cudaFree(s.wire));
  s.wire = nullptr;
  s.wire_count = 0;
  POSEIDON_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.wire), count * sizeof(uint16_t)));
  s.wire_count = count;
  return s.wire;
}

std::function<bool()> GpuAllReduce::mean_in_place(float* gpu, size_t count, uint16_t* wire) {
  State& s = *state_;
  POSEIDON_CUDA_CHECK(cudaSetDevice(s.device));
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.gradients, 0));
  if (wire) {
    cuda::round_to_bf16(wire, gpu, count, s.stream);
    POSEIDON_NCCL_CHECK(ncclAllReduce(wire, wire, count, ncclBfloat16, ncclSum, s.comm, s.stream));
    cuda::widen_bf16(gpu, wire, count, false, s.stream);
  } else {
    POSEIDON_NCCL_CHECK(ncclAllReduce(gpu, gpu, count, ncclFloat, ncclSum, s.comm, s.stream));
  }
  scale_in_place(gpu, count, 1.f / static_cast<float>(s.ranks), s.stream);
  return s.landed_test();
}

}  // namespace poseidon::dist
