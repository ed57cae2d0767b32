// The bfloat16 casts and sums of precision bf16 on the GPU (see bf16.h).
#include "core/cuda/bf16.h"

#include "core/bf16.h"
#include "core/channel_walk.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"

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

// One block per channel (grid-stride over channels): each thread sums a
// strided share of the channel's outer * inner values, then the block adds
// the shares in a fixed tree, so the result does not vary from run to run.
// The share's elements are walked without a 64-bit division each
// (core/channel_walk.h), in the same order.
__global__ void channel_sums_kernel(float* sums, const uint16_t* x, size_t outer, size_t channels, size_t inner) {
  __shared__ float shares[kThreads];
  for (size_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float share = 0.f;
    for (ChannelWalk w(threadIdx.x, blockDim.x, inner); w.inside(outer); w.next())
      share += from_bf16(x[w.offset(c, channels)]);
    shares[threadIdx.x] = share;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shares[threadIdx.x] += shares[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[c] = shares[0];
    // Every thread has read shares[0] before the next channel overwrites it.
    __syncthreads();
  }
}

}  // namespace

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

void channel_sums_bf16(float* sums, const uint16_t* x, size_t outer, size_t channels, size_t inner,
                       cudaStream_t stream) {
  if (!channels) return;
  const unsigned blocks = static_cast<unsigned>(channels < kMaxBlocks ? channels : kMaxBlocks);
  channel_sums_kernel<<<blocks, kThreads, 0, stream>>>(sums, x, outer, channels, inner);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace poseidon::cuda
