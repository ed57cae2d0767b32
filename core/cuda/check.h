// Every CUDA, cuBLAS and cuDNN call goes through one of these checks (and
// other libraries' calls through checks of the same kind, on fail()):
// a failure throws an Error naming the call, the source line and the
// library's own message, instead of surfacing later as wrong numbers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace poseidon::cuda {

[[noreturn]] void fail(const char* library, const char* call, const char* file, int line, const std::string& message);
const char* cublas_message(cublasStatus_t status);

}  // namespace poseidon::cuda

#define POSEIDON_CUDA_CHECK(call)                                                       \
  do {                                                                                  \
    cudaError_t poseidon_status_ = (call);                                              \
    if (poseidon_status_ != cudaSuccess)                                                \
      ::poseidon::cuda::fail("CUDA", #call, __FILE__, __LINE__,                         \
                             cudaGetErrorString(poseidon_status_));                     \
  } while (0)

#define POSEIDON_CUBLAS_CHECK(call)                                                     \
  do {                                                                                  \
    cublasStatus_t poseidon_status_ = (call);                                           \
    if (poseidon_status_ != CUBLAS_STATUS_SUCCESS)                                      \
      ::poseidon::cuda::fail("cuBLAS", #call, __FILE__, __LINE__,                       \
                             ::poseidon::cuda::cublas_message(poseidon_status_));       \
  } while (0)

#define POSEIDON_CUDNN_CHECK(call)                                                      \
  do {                                                                                  \
    cudnnStatus_t poseidon_status_ = (call);                                            \
    if (poseidon_status_ != CUDNN_STATUS_SUCCESS)                                       \
      ::poseidon::cuda::fail("cuDNN", #call, __FILE__, __LINE__,                        \
                             cudnnGetErrorString(poseidon_status_));                    \
  } while (0)

// Kernel launches report configuration errors only through the next query.
#define POSEIDON_CUDA_CHECK_LAUNCH() POSEIDON_CUDA_CHECK(cudaGetLastError())
