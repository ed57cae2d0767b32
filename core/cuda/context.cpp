// Per-GPU contexts (see context.h), created once and kept until exit.
#include "core/cuda/context.h"

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "core/error.h"

namespace poseidon::cuda {

Context& Context::get(int device) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<Context>> contexts;
  std::lock_guard lock(mutex);
  if (device < 0) throw Error("negative CUDA device index " + std::to_string(device));
  if (static_cast<size_t>(device) >= contexts.size()) contexts.resize(device + 1);
  if (!contexts[device]) contexts[device].reset(new Context(device));
  POSEIDON_CUDA_CHECK(cudaSetDevice(device));
  return *contexts[device];
}

Context::Context(int device) : device_(device), allocator_(device) {
  int count = 0;
  POSEIDON_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= count)
    throw Error("device cuda:" + std::to_string(device) + " does not exist (" + std::to_string(count) +
                " GPU(s) visible)");
  POSEIDON_CUDA_CHECK(cudaSetDevice(device));
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&to_host_, cudaStreamNonBlocking));
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&to_device_, cudaStreamNonBlocking));
  const char* tf32 = std::getenv("POSEIDON_TF32");
  tf32_ = tf32 && std::string(tf32) == "1";
  const char* fastest = std::getenv("POSEIDON_CUDNN_FASTEST");
  deterministic_ = !(fastest && std::string(fastest) == "1");
  POSEIDON_CUBLAS_CHECK(cublasCreate(&cublas_));
  POSEIDON_CUBLAS_CHECK(cublasSetStream(cublas_, compute_));
  // A workspace of our own, set after the stream (which resets it): cuBLAS
  // otherwise takes its own, which it may not do inside a captured step.
  POSEIDON_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspace));
  POSEIDON_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace));
  POSEIDON_CUBLAS_CHECK(cublasSetMathMode(cublas_, cublas_math()));
}

void Context::set_tf32(bool on) {
  tf32_ = on;
  POSEIDON_CUBLAS_CHECK(cublasSetMathMode(cublas_, cublas_math()));
}

cudnnHandle_t Context::cudnn() {
  std::lock_guard lock(cudnn_mutex_);
  if (cudnn_) return cudnn_;
  POSEIDON_CUDA_CHECK(cudaSetDevice(device_));
  const cudnnStatus_t status = cudnnCreate(&cudnn_);
  if (status != CUDNN_STATUS_SUCCESS) {
    cudnn_ = nullptr;
    throw Error(std::string("cuDNN cannot start on cuda:") + std::to_string(device_) + ": " +
                cudnnGetErrorString(status) + " (cuDNN " + std::to_string(cudnnGetVersion()) +
                "; it loads libcudnn_*.so.9 by name: their folder, e.g. pip's site-packages/nvidia/cudnn/lib, must be "
                "on LD_LIBRARY_PATH)");
  }
  POSEIDON_CUDNN_CHECK(cudnnSetStream(cudnn_, compute_));
  return cudnn_;
}

void* Context::allocate_for(size_t bytes, cudaStream_t stream) {
  void* ptr = allocator_.allocate(bytes);
  if (stream != compute_) order(stream, compute_);
  return ptr;
}

void Context::release_from(void* ptr, cudaStream_t stream) {
  if (!ptr) return;
  if (stream != compute_) order(compute_, stream);
  allocator_.release(ptr);
}

void Context::order(cudaStream_t later, cudaStream_t earlier) {
  cudaEvent_t done = nullptr;
  POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  POSEIDON_CUDA_CHECK(cudaEventRecord(done, earlier));
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(later, done, 0));
  // Released now, destroyed by the runtime once recorded work completes.
  POSEIDON_CUDA_CHECK(cudaEventDestroy(done));
}

Context::~Context() {
  // Runs at exit, possibly after the driver has begun to unload: failures
  // are ignored.
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  for (cudaStream_t s : {compute_, to_host_, to_device_})
    if (s) cudaStreamDestroy(s);
}

void* Context::workspace(size_t bytes) {
  POSEIDON_CHECK(bytes <= kWorkspaceLimit) << "workspace of " << bytes << " bytes asked, limit " << kWorkspaceLimit;
  return grow(workspace_, bytes);
}

void* Context::bf16_operand(Bf16Operand slot, size_t bytes) {
  return grow(bf16_operands_.at(static_cast<size_t>(slot)), bytes);
}

void Context::refuse_memory_while_captured() {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  POSEIDON_CUDA_CHECK(cudaStreamIsCapturing(compute_, &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    throw Error("the step requests GPU memory, which a replay would not do");
}

void* Context::grow(Scratch& scratch, size_t bytes) {
  if (bytes > scratch.bytes) {
    // A captured graph would keep the old scratch, which the allocator may
    // hand to others: the step's plain run grows it.
    refuse_memory_while_captured();
    // Work still queued on the compute stream may use the old scratch; the
    // allocator hands a block out again only to work queued behind it.
    allocator_.release(scratch.ptr);
    scratch = {};
    scratch.ptr = allocator_.allocate(bytes);
    scratch.bytes = bytes;
  }
  return scratch.ptr;
}

}  // namespace poseidon::cuda
