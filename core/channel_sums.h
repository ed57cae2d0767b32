// The bias gradient's sums, sums[c] = the sum over i < outer, j < inner of
// x[(i * channels + c) * inner + j] (an NCHW output gradient: outer = N,
// inner = H * W; an [N, C] one: inner = 1), split so that a GPU sums every
// channel with many blocks at once, in an order fixed by the shape alone:
// the same bits run after run and on any GPU. The plan and the order are
// shared by the kernels (core/cuda/channel_sums.cu) and by the CPU reference
// below, which the GPU's results are compared with bit for bit.
//
// A channel's values are cut into chunks (core/channel_chunks.h); each
// chunk's partial sum is formed on its own, and the partials are added in
// chunk order (partial 0, + partial 1, ...). A chunk is summed in one of two
// ways:
// - strided (inner > 1): by kThreads threads, thread t adding the chunk's
//   values t, t + kThreads, ... in turn from 0, then the threads' shares
//   added in a fixed tree (share[t] += share[t + half], half = kThreads / 2
//   down to 1);
// - sequential (inner == 1: a channel is a column of a row-major matrix, so
//   neighbouring channels are neighbouring values and one thread per channel
//   reads rows coalesced): the chunk's values added in turn from 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/channel_chunks.h"

namespace poseidon {

struct ChannelSumsPlan : ChannelChunks {
  // Threads that share a strided chunk (a GPU block).
  static constexpr size_t kThreads = 256;
  // A strided chunk gives each of its threads at least this many values.
  static constexpr size_t kValuesPerThread = 16;
  // A sequential chunk holds at least this many rows.
  static constexpr size_t kRowsPerChunk = 256;
  // The most chunks a channel is cut into (the partials that one thread
  // adds at the end).
  static constexpr size_t kMaxChunks = 64;

  bool strided = true;
};

ChannelSumsPlan plan_channel_sums(size_t outer, size_t channels, size_t inner);

// The CPU reference: the plan's sums in the plan's order, from float32
// values or from bfloat16 ones (their 16 bits).
void channel_sums_reference(float* sums, const float* x, const ChannelSumsPlan& plan);
void channel_sums_reference(float* sums, const uint16_t* x, const ChannelSumsPlan& plan);

}  // namespace poseidon
