// GpuAllReduce (dist/gpu/gpu_allreduce.h) with NCCL: ncclAllReduce in place on the
// communicator's stream, the copy to the host behind it on the same stream,
// and an event after both that the communication thread queries.
#include "dist/gpu/gpu_allreduce.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/device_info.h"
#include "core/device_memory.h"
#include "core/error.h"

// An NCCL call that fails throws, as core/cuda/check.h does for CUDA's.
#define POSEIDON_NCCL_CHECK(call)                                                       \
  do {                                                                                  \
    ncclResult_t poseidon_status_ = (call);                                             \
    if (poseidon_status_ != ncclSuccess)                                                \
      ::poseidon::cuda::fail("NCCL", #call, __FILE__, __LINE__,                         \
                             ncclGetErrorString(poseidon_status_));                     \
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
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
};

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
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  POSEIDON_NCCL_CHECK(ncclCommInitRank(&state_->comm, ranks, nccl_id, rank));
}

GpuAllReduce::~GpuAllReduce() {
  cudaSetDevice(state_->device);
  cudaStreamSynchronize(state_->stream);
  ncclCommDestroy(state_->comm);
  cudaStreamDestroy(state_->stream);
}

std::function<bool()> GpuAllReduce::sum_to_host(float* gpu, float* host, size_t count) {
  State& s = *state_;
  POSEIDON_CUDA_CHECK(cudaSetDevice(s.device));
  POSEIDON_NCCL_CHECK(ncclAllReduce(gpu, gpu, count, ncclFloat, ncclSum, s.comm, s.stream));
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(host, gpu, count * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
  cudaEvent_t landed = nullptr;
  POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&landed, cudaEventDisableTiming));
  POSEIDON_CUDA_CHECK(cudaEventRecord(landed, s.stream));
  auto event = std::shared_ptr<CUevent_st>(landed, [](cudaEvent_t e) { cudaEventDestroy(e); });
  return [event] {
    const cudaError_t status = cudaEventQuery(event.get());
    if (status == cudaErrorNotReady) {
      // Not an error, but the runtime keeps it as the last error, where the
      // next launch check (cudaGetLastError) would take it for its own.
      cudaGetLastError();
      return false;
    }
    POSEIDON_CUDA_CHECK(status);
    return true;
  };
}

}  // namespace poseidon::dist
