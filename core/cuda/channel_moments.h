// The channel moments on the GPU (plan, arithmetic and order:
// core/channel_moments.h): every channel's count, mean and M2 in double from
// one pass over the values, each channel worked on by several blocks at
// once, the chunks joined in a fixed order, so the moments are the same bits
// run after run and equal the CPU reference's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/channel_moments.h"
#include "core/cuda/context.h"

namespace poseidon::cuda {

// moments[c] (device memory) = the moments of x[(i * channels + c) * inner + j]
// over i < outer, j < inner, queued on gpu's compute stream; the chunks'
// moments live in gpu's workspace.
// A bfloat16 x (its bits) is widened as it is read.
void channel_moments(Context& gpu, Moments* moments, const float* x, size_t outer, size_t channels, size_t inner);
void channel_moments(Context& gpu, Moments* moments, const uint16_t* x, size_t outer, size_t channels, size_t inner);

}  // namespace poseidon::cuda
