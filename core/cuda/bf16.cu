// The bfloat16 casts of precision bf16 on the GPU (see bf16.h).
#include "core/cuda/bf16.h"

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"

namespace poseidon::cuda {

namespace {

constexpr unsigned kThreads = 256;

__global__ void fill_kernel(uint16_t* ptr, size_t n, uint16_t value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    ptr[i] = value;
}

__global__ void round_kernel(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = to_bf16(src[i]);
}

__global__ void widen_kernel(float* dst, const uint16_t* src, size_t n, bool accumulate) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = accumulate ? dst[i] + from_bf16(src[i]) : from_bf16(src[i]);
}

template <class T>
__global__ void add_rounded_kernel(uint16_t* dst, const T* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = to_bf16(from_bf16(dst[i]) + load(src, i));
}

template <class T>
void add_rounded(uint16_t* dst, const T* src, size_t n, cudaStream_t stream) {
  if (!n) return;
  add_rounded_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add_rounded_into_bf16(uint16_t* dst, const float* src, size_t n, cudaStream_t stream) {
  add_rounded(dst, src, n, stream);
}

void add_rounded_into_bf16(uint16_t* dst, const uint16_t* src, size_t n, cudaStream_t stream) {
  add_rounded(dst, src, n, stream);
}

void fill_bf16(uint16_t* ptr, size_t n, uint16_t value, cudaStream_t stream) {
  if (!n) return;
  fill_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(ptr, n, value);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void round_to_bf16(uint16_t* dst, const float* src, size_t n, cudaStream_t stream) {
  if (!n) return;
  round_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void widen_bf16(float* dst, const uint16_t* src, size_t n, bool accumulate, cudaStream_t stream) {
  if (!n) return;
  widen_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(dst, src, n, accumulate);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace poseidon::cuda
