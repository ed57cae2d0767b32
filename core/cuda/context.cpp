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
  POSEIDON_CUBLAS_CHECK(cublasCreate(&cublas_));
  POSEIDON_CUBLAS_CHECK(cublasSetStream(cublas_, compute_));
  POSEIDON_CUBLAS_CHECK(cublasSetMathMode(cublas_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  POSEIDON_CUDNN_CHECK(cudnnCreate(&cudnn_));
  POSEIDON_CUDNN_CHECK(cudnnSetStream(cudnn_, compute_));
}

Context::~Context() {
  // Runs at exit, possibly after the driver has begun to unload: failures
  // are ignored.
  if (workspace_) cudaFree(workspace_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  for (cudaStream_t s : {compute_, to_host_, to_device_})
    if (s) cudaStreamDestroy(s);
}

void* Context::workspace(size_t bytes) {
  POSEIDON_CHECK(bytes <= kWorkspaceLimit) << "workspace of " << bytes << " bytes asked, limit " << kWorkspaceLimit;
  if (bytes > workspace_bytes_) {
    // Work still queued may use the old scratch.
    POSEIDON_CUDA_CHECK(cudaStreamSynchronize(compute_));
    if (workspace_) POSEIDON_CUDA_CHECK(cudaFree(workspace_));
    workspace_ = nullptr;
    POSEIDON_CUDA_CHECK(cudaMalloc(&workspace_, bytes));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

}  // namespace poseidon::cuda
