// The channel sums' kernels (see channel_sums.h and core/channel_sums.h).
#include "core/bf16.h"
#include "core/channel_sums.h"
#include "core/channel_walk.h"
#include "core/cuda/channel_sums.h"
#include "core/cuda/check.h"

namespace poseidon::cuda {

namespace {

constexpr unsigned kThreads = ChannelSumsPlan::kThreads;
// A grid's y dimension is at most 65535 blocks; more channels loop.
constexpr unsigned kMaxGridY = 65535;

__device__ float value_of(float v) { return v; }
__device__ float value_of(uint16_t v) { return from_bf16(v); }

// Where chunk k's sum goes: the channel's sum itself when it is its only
// chunk, else its partial.
__device__ float* chunk_result(const ChannelSumsPlan& p, float* sums, float* partials, size_t c, size_t k) {
  return p.chunks == 1 ? &sums[c] : &partials[c * p.chunks + k];
}

// Strided chunks: block (k, y) sums chunk k of channels y, y + gridDim.y, ...
// Each thread walks its values without a division each (core/channel_walk.h);
// the shares meet in the plan's tree.
template <class T>
__global__ void strided_chunks(ChannelSumsPlan p, const T* x, float* sums, float* partials) {
  __shared__ float shares[kThreads];
  const size_t k = blockIdx.x;
  const size_t start = p.begin(k) + threadIdx.x, end = p.end(k);
  const size_t steps = start < end ? (end - start + kThreads - 1) / kThreads : 0;
  const ChannelWalk first(start, kThreads, p.inner);
  for (size_t c = blockIdx.y; c < p.channels; c += gridDim.y) {
    float share = 0.f;
    ChannelWalk w = first;
    for (size_t s = 0; s < steps; ++s, w.next()) share += value_of(x[w.offset(c, p.channels)]);
    shares[threadIdx.x] = share;
    __syncthreads();
    for (unsigned half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shares[threadIdx.x] += shares[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) *chunk_result(p, sums, partials, c, k) = shares[0];
    // shares[0] is read before the next channel overwrites the shares.
    __syncthreads();
  }
}

// Sequential chunks (inner == 1): thread c of grid row k adds chunk k's rows
// of column c in turn, reading neighbouring columns side by side.
template <class T>
__global__ void sequential_chunks(ChannelSumsPlan p, const T* x, float* sums, float* partials) {
  const size_t k = blockIdx.y;
  const size_t rows = p.end(k) - p.begin(k);
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < p.channels; c += size_t(gridDim.x) * blockDim.x) {
    const T* v = x + p.begin(k) * p.channels + c;
    float partial = 0.f;
    for (size_t r = 0; r < rows; ++r, v += p.channels) partial += value_of(*v);
    *chunk_result(p, sums, partials, c, k) = partial;
  }
}

// sums[c] = partial 0 + partial 1 + ..., in chunk order.
__global__ void add_partials(ChannelSumsPlan p, const float* partials, float* sums) {
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < p.channels; c += size_t(gridDim.x) * blockDim.x) {
    const float* mine = partials + c * p.chunks;
    float total = mine[0];
    for (size_t k = 1; k < p.chunks; ++k) total += mine[k];
    sums[c] = total;
  }
}

template <class T>
void launch(Context& gpu, float* sums, const T* x, size_t outer, size_t channels, size_t inner) {
  if (!channels) return;
  const ChannelSumsPlan p = plan_channel_sums(outer, channels, inner);
  cudaStream_t stream = gpu.compute();
  if (p.chunks == 0) {
    POSEIDON_CUDA_CHECK(cudaMemsetAsync(sums, 0, channels * sizeof(float), stream));
    return;
  }
  float* partials = p.chunks > 1 ? static_cast<float*>(gpu.workspace(channels * p.chunks * sizeof(float))) : nullptr;
  const unsigned chunks = static_cast<unsigned>(p.chunks);
  if (p.strided) {
    const dim3 grid(chunks, static_cast<unsigned>(channels < kMaxGridY ? channels : kMaxGridY));
    strided_chunks<<<grid, kThreads, 0, stream>>>(p, x, sums, partials);
  } else {
    sequential_chunks<<<dim3(blocks_for(channels, kThreads), chunks), kThreads, 0, stream>>>(p, x, sums, partials);
  }
  POSEIDON_CUDA_CHECK_LAUNCH();
  if (p.chunks == 1) return;
  add_partials<<<blocks_for(channels, kThreads), kThreads, 0, stream>>>(p, partials, sums);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace

void channel_sums(Context& gpu, float* sums, const float* x, size_t outer, size_t channels, size_t inner) {
  launch(gpu, sums, x, outer, channels, inner);
}

void channel_sums(Context& gpu, float* sums, const uint16_t* x, size_t outer, size_t channels, size_t inner) {
  launch(gpu, sums, x, outer, channels, inner);
}

}  // namespace poseidon::cuda
