// The bias gradient's channel sums on the GPU (plan and order:
// core/channel_sums.h): every channel summed by several blocks at once, the
// partials added in a fixed order, so the sums are the same bits run after
// run and equal the CPU reference's. Float32 values, or bfloat16 ones (the
// rounded output gradient of precision bf16) passed as their 16 bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"

namespace poseidon::cuda {

// sums[c] (device memory) = the sum over i < outer, j < inner of
// x[(i * channels + c) * inner + j], queued on gpu's compute stream; the
// partials live in gpu's workspace.
void channel_sums(Context& gpu, float* sums, const float* x, size_t outer, size_t channels, size_t inner);
void channel_sums(Context& gpu, float* sums, const uint16_t* x, size_t outer, size_t channels, size_t inner);

}  // namespace poseidon::cuda
