// The bias epilogue on the GPU (core/bias_epilogue.h): a conv's or fc's
// output is its product plus the channel's bias, clamped at zero where a
// ReLU is fused, in one pass over the output (from the product in place, or
// from the bfloat16 product as it is widened), into a float32 output or a
// bfloat16 one (the result rounded once); and the fused ReLU's mask on the
// output gradient, in either type. Queued on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace poseidon::cuda {

// out[(i * channels + c) * inner + j] = biased(y[same], bias, c, relu);
// y may be out; bias (device memory) may be null.
void bias_epilogue(float* out, const float* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream);
void bias_epilogue(float* out, const uint16_t* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream);
void bias_epilogue(uint16_t* out, const float* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream);
void bias_epilogue(uint16_t* out, const uint16_t* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream);
// dy[i] = relu_masked(y[i], dy[i]) for i < n.
void relu_mask(const float* y, float* dy, size_t n, cudaStream_t stream);
void relu_mask(const uint16_t* y, uint16_t* dy, size_t n, cudaStream_t stream);

}  // namespace poseidon::cuda
