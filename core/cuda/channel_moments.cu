// The channel moments' kernels (see channel_moments.h and core/channel_moments.h).
#include "core/cuda/channel_moments.h"
#include "core/cuda/check.h"

namespace poseidon::cuda {

namespace {

constexpr unsigned kThreads = ChannelMomentsPlan::kThreads;
constexpr unsigned kLanes = ChannelMomentsPlan::kLanes;
static_assert(kLanes == 32, "a channel's chunks are joined by one warp");
// A grid's y dimension is at most 65535 blocks; more channels loop.
constexpr unsigned kMaxGridY = 65535;

// Block (k, y) forms chunk k's moments of channels y, y + gridDim.y, ...:
// each thread its own values' (core/channel_moments.h), then the plan's tree.
// A channel of one chunk gets its moments directly, else the chunk's partial.
template <class T>
__global__ void chunk_moments(ChannelMomentsPlan p, const T* x, Moments* moments, Moments* partials) {
  __shared__ Moments shares[kThreads];
  const size_t k = blockIdx.x;
  for (size_t c = blockIdx.y; c < p.channels; c += gridDim.y) {
    shares[threadIdx.x] = thread_moments(p, x, c, k, threadIdx.x);
    __syncthreads();
    for (unsigned half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shares[threadIdx.x] = merge_moments(shares[threadIdx.x], shares[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0) (p.chunks == 1 ? moments[c] : partials[c * p.chunks + k]) = shares[0];
    // shares[0] is read before the next channel overwrites the shares.
    __syncthreads();
  }
}

// One warp per channel joins its chunks: lane l those of lane_moments, then
// the lanes in the plan's tree (lane l takes lane l + half's moments).
__global__ void join_chunks(ChannelMomentsPlan p, const Moments* partials, Moments* moments) {
  const unsigned lane = threadIdx.x % kLanes;
  const size_t warps = size_t(gridDim.x) * blockDim.x / kLanes;
  for (size_t c = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / kLanes; c < p.channels; c += warps) {
    Moments mine = lane_moments(p, partials + c * p.chunks, lane);
    for (unsigned half = kLanes / 2; half > 0; half /= 2) {
      const Moments other = {__shfl_down_sync(0xffffffffu, mine.count, half),
                             __shfl_down_sync(0xffffffffu, mine.mean, half),
                             __shfl_down_sync(0xffffffffu, mine.m2, half)};
      if (lane < half) mine = merge_moments(mine, other);
    }
    if (lane == 0) moments[c] = mine;
  }
}

template <class T>
void queue_channel_moments(Context& gpu, Moments* moments, const T* x, size_t outer, size_t channels, size_t inner) {
  if (!channels) return;
  const ChannelMomentsPlan p = plan_channel_moments(outer, channels, inner);
  cudaStream_t stream = gpu.compute();
  if (p.chunks == 0) {
    POSEIDON_CUDA_CHECK(cudaMemsetAsync(moments, 0, channels * sizeof(Moments), stream));
    return;
  }
  Moments* partials =
      p.chunks > 1 ? static_cast<Moments*>(gpu.workspace(channels * p.chunks * sizeof(Moments))) : nullptr;
  const dim3 grid(static_cast<unsigned>(p.chunks), static_cast<unsigned>(channels < kMaxGridY ? channels : kMaxGridY));
  chunk_moments<<<grid, kThreads, 0, stream>>>(p, x, moments, partials);
  POSEIDON_CUDA_CHECK_LAUNCH();
  if (p.chunks == 1) return;
  join_chunks<<<blocks_for(channels * kLanes, 256), 256, 0, stream>>>(p, partials, moments);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace

void channel_moments(Context& gpu, Moments* moments, const float* x, size_t outer, size_t channels, size_t inner) {
  queue_channel_moments(gpu, moments, x, outer, channels, inner);
}

void channel_moments(Context& gpu, Moments* moments, const uint16_t* x, size_t outer, size_t channels, size_t inner) {
  queue_channel_moments(gpu, moments, x, outer, channels, inner);
}

}  // namespace poseidon::cuda
