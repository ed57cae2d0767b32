// Per-channel sums in double over an [N, C, S] tensor, split over a grid of
// blocks: each channel's N * S values are cut into chunks, one block sums a
// chunk, and the chunks' partials are then added in order. A few channels
// of many values fill the GPU as well as many channels of few, and the sums
// are the same bits run after run. Shared by the layers whose gradients sum
// each channel's values (batch norm's backward, PReLU's slopes).
#pragma once

#include <algorithm>
#include <cstdint>

namespace poseidon::cuda {

constexpr int kChunkThreads = 256;      // threads of a block that sums a chunk
constexpr int64_t kChunkValues = 4096;  // values of one channel a block sums, at least
constexpr int64_t kMaxChunks = 1024;

// How one channel's `count` values are split over blocks.
struct Chunks {
  int64_t per_chunk, chunks;
};

inline Chunks chunks_for(int64_t count) {
  const int64_t chunks = std::clamp<int64_t>((count + kChunkValues - 1) / kChunkValues, 1, kMaxChunks);
  return {(count + chunks - 1) / chunks, chunks};
}

// The grid's second dimension: a row of blocks per channel, at most 65535
// rows, each then taking every 65535th channel.
inline unsigned chunk_grid_rows(int64_t channels) { return static_cast<unsigned>(std::min<int64_t>(channels, 65535)); }

// The sum of every thread's `v` over a block of kChunkThreads, returned to
// all threads; scratch holds kChunkThreads doubles in shared memory.
__device__ inline double block_sum(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = kChunkThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();  // before the scratch is written again
  return total;
}

// Where value i (0 <= i < batch * spatial) of channel c sits in [N, C, S].
__device__ inline int64_t value_index(int64_t i, int64_t c, int64_t channels, int64_t spatial) {
  const int64_t n = i / spatial;
  return (n * channels + c) * spatial + (i - n * spatial);
}

// Values [begin, end) of a chunk of `count` values.
__device__ inline int64_t chunk_begin(const Chunks& split, int64_t chunk) { return chunk * split.per_chunk; }
__device__ inline int64_t chunk_end(const Chunks& split, int64_t chunk, int64_t count) {
  return min(count, (chunk + 1) * split.per_chunk);
}

// Channel c's partials (c * chunks + k, k < chunks) added in order.
__device__ inline double channel_total(const double* partial, int64_t c, int64_t chunks) {
  double total = 0;
  for (int64_t k = 0; k < chunks; ++k) total += partial[c * chunks + k];
  return total;
}

}  // namespace poseidon::cuda
