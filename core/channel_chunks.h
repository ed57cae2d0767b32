// How a per-channel reduction over an [outer, channels, inner] tensor
// (NCHW: outer = N, inner = H * W) cuts each channel's outer * inner values,
// taken in flat order (i, then j), into chunks that GPU blocks reduce at
// once: `chunks` chunks of `chunk` values, the last one shorter. Fixed by
// the shape alone, so the order of every sum is the same run after run.
// The geometry shared by the channel sums (core/channel_sums.h) and the
// channel moments (core/channel_moments.h).
#pragma once

#include <cstddef>

#include "core/host_device.h"

namespace poseidon {

struct ChannelChunks {
  size_t outer = 0, channels = 0, inner = 0;
  size_t chunk = 0;   // values of a channel per chunk
  size_t chunks = 0;  // chunks per channel (0 when a channel is empty)

  POSEIDON_HOST_DEVICE size_t per_channel() const { return outer * inner; }
  // The first value of chunk k, and one past its last.
  POSEIDON_HOST_DEVICE size_t begin(size_t k) const { return k * chunk; }
  POSEIDON_HOST_DEVICE size_t end(size_t k) const {
    const size_t e = (k + 1) * chunk;
    return e < per_channel() ? e : per_channel();
  }
};

// A channel cut into chunks of at least `least` values, at most
// `max_chunks` of them, each chunk a multiple of `stride` values (so that
// every thread of a block striding by `stride` starts at the same place in
// its stride; 1 for none).
ChannelChunks cut_channels(size_t outer, size_t channels, size_t inner, size_t least, size_t max_chunks,
                           size_t stride);

}  // namespace poseidon
