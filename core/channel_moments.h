// Per-channel moments of an [outer, channels, inner] tensor (NCHW: outer = N,
// inner = H * W): each channel's count, mean and M2 (the sum of squared
// deviations from the mean) in double, in one pass over the values, split so
// that a GPU works on every channel with many blocks at once, and in an
// order fixed by the shape alone: the same bits run after run and on any
// GPU. Batch normalisation's statistics (mean, M2 / count) come from here.
// The plan, the arithmetic and the order are shared by the kernels
// (core/cuda/channel_moments.cu) and by the CPU reference below, which the
// GPU's results are compared with bit for bit.
//
// A channel's values are cut into chunks (core/channel_chunks.h), each
// shared by kThreads threads: thread t takes the chunk's values t,
// t + kThreads, ... in groups of kGroup. A group's moments are exact to
// double's rounding from its values alone (their mean, then the squares of
// their deviations from it: no sum of squares less a squared sum, which
// loses every digit when the mean is large next to the spread), and pieces
// are joined with Chan et al.'s pairwise formula (merge_moments): a thread
// joins its groups in turn; the threads' moments meet in a fixed tree
// (share[t] = merge(share[t], share[t + half]), half = kThreads / 2 down to
// 1); a channel's chunks are joined by kLanes lanes, lane l joining chunks
// l, l + kLanes, ... in turn, and the lanes in the same kind of tree. Every
// product that meets a sum is an explicit fma, so no compiler can fuse the
// two differently on either side.
#pragma once

#include <cmath>
#include <cstddef>

#include "core/bf16.h"
#include "core/channel_chunks.h"
#include "core/channel_walk.h"
#include "core/host_device.h"

#ifdef __CUDA_ARCH__
#define POSEIDON_MOMENTS_UNROLL _Pragma("unroll")
#else
#define POSEIDON_MOMENTS_UNROLL
#endif

namespace poseidon {

// The moments of `count` values (no initialisers: GPU shared memory holds
// them).
struct Moments {
  double count, mean, m2;  // m2: the sum of (value - mean)^2
};

struct ChannelMomentsPlan : ChannelChunks {
  // Threads that share a chunk (a GPU block); a chunk holds a multiple of
  // them.
  static constexpr size_t kThreads = 256;
  // Values a thread holds at once: one group.
  static constexpr size_t kGroup = 16;
  // The most chunks a channel is cut into, and the lanes that join them.
  static constexpr size_t kMaxChunks = 1024;
  static constexpr size_t kLanes = 32;
};

ChannelMomentsPlan plan_channel_moments(size_t outer, size_t channels, size_t inner);

// The moments of a's values followed by b's (Chan, Golub and LeVeque): the
// means' difference carries what neither M2 holds.
POSEIDON_HOST_DEVICE inline Moments merge_moments(const Moments& a, const Moments& b) {
  if (b.count == 0) return a;
  if (a.count == 0) return b;
  const double count = a.count + b.count;
  const double delta = b.mean - a.mean;
  const double b_share = b.count / count;
  return {count, fma(delta, b_share, a.mean), fma(delta * delta, a.count * b_share, a.m2 + b.m2)};
}

// The moments of a group's first `held` values (held <= kGroup).
POSEIDON_HOST_DEVICE inline Moments group_moments(const float (&v)[ChannelMomentsPlan::kGroup], size_t held) {
  double sum = 0;
  POSEIDON_MOMENTS_UNROLL
  for (size_t j = 0; j < ChannelMomentsPlan::kGroup; ++j)
    if (j < held) sum += v[j];
  const double count = static_cast<double>(held);
  const double mean = sum / count;
  double m2 = 0;
  POSEIDON_MOMENTS_UNROLL
  for (size_t j = 0; j < ChannelMomentsPlan::kGroup; ++j)
    if (j < held) {
      const double d = v[j] - mean;
      m2 = fma(d, d, m2);
    }
  return {count, mean, m2};
}

// Thread t's moments of chunk k of channel c: its values' groups in turn.
// x holds float32 values or bfloat16 ones (their bits), widened as read.
template <class T>
POSEIDON_HOST_DEVICE inline Moments thread_moments(const ChannelMomentsPlan& p, const T* x, size_t c, size_t k,
                                                   size_t t) {
  constexpr size_t kThreads = ChannelMomentsPlan::kThreads, kGroup = ChannelMomentsPlan::kGroup;
  const size_t start = p.begin(k) + t, end = p.end(k);
  const size_t steps = start < end ? (end - start + kThreads - 1) / kThreads : 0;
  Moments mine = {0, 0, 0};
  ChannelWalk walk(start, kThreads, p.inner);
  for (size_t s = 0; s < steps; s += kGroup) {
    const size_t held = steps - s < kGroup ? steps - s : kGroup;
    float v[kGroup] = {};
    POSEIDON_MOMENTS_UNROLL
    for (size_t j = 0; j < kGroup; ++j)
      if (j < held) {
        v[j] = as_float(x[walk.offset(c, p.channels)]);
        walk.next();
      }
    mine = merge_moments(mine, group_moments(v, held));
  }
  return mine;
}

// Lane l's moments of a channel's chunk moments (`partials`, in chunk
// order): chunks l, l + kLanes, ... in turn.
POSEIDON_HOST_DEVICE inline Moments lane_moments(const ChannelMomentsPlan& p, const Moments* partials, size_t l) {
  Moments mine = {0, 0, 0};
  for (size_t k = l; k < p.chunks; k += ChannelMomentsPlan::kLanes) mine = merge_moments(mine, partials[k]);
  return mine;
}

// The CPU reference: moments[c] for every channel, in the plan's order
// (count 0, mean 0, m2 0 for an empty channel).
void channel_moments_reference(Moments* moments, const float* x, const ChannelMomentsPlan& plan);

}  // namespace poseidon
