// A walk over one channel's elements of an [outer, channels, inner] tensor
// (NCHW: outer = N, inner = H * W) in steps of `step` flat positions of that
// channel, as a GPU thread takes every blockDim-th one, that divides once
// where it starts instead of at every element: a step moves step / inner
// rows and step % inner columns, with one carry. Shared by the GPU's channel
// sums (core/cuda/channel_sums.cu) and the host test that checks it visits what
// t / inner, t % inner would (tests/core/channel_walk_test.cpp).
#pragma once

#include <cstddef>

#include "core/host_device.h"

namespace poseidon {

struct ChannelWalk {
  size_t i, j;  // the current element's outer and inner index
  size_t step_rows, step_columns, inner;

  POSEIDON_HOST_DEVICE ChannelWalk(size_t start, size_t step, size_t inner_size)
      : i(start / inner_size),
        j(start % inner_size),
        step_rows(step / inner_size),
        step_columns(step % inner_size),
        inner(inner_size) {}
  // Whether the walk is still inside a channel of `outer` rows.
  POSEIDON_HOST_DEVICE bool inside(size_t outer) const { return i < outer; }
  // The current element's flat index in the tensor, in channel c of `channels`.
  POSEIDON_HOST_DEVICE size_t offset(size_t c, size_t channels) const { return (i * channels + c) * inner + j; }
  POSEIDON_HOST_DEVICE void next() {
    i += step_rows;
    j += step_columns;
    if (j >= inner) {
      j -= inner;
      ++i;
    }
  }
};

}  // namespace poseidon
