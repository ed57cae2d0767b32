// What a product layer (conv) does to its output after the product: add the
// bias of each channel and, where it applies a fused ReLU
// (core/relu_fusion.h), clamp at zero; and in backward, the fused ReLU's
// mask on the output gradient. One formula for the GPU's epilogue kernels
// (core/cuda/bias_epilogue.cu) and for the CPU references below, which the
// GPU's results are compared with bit for bit (an add and a comparison
// round alike everywhere).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace poseidon {

// The output value from the product's value y and the channel's bias (none:
// y as it is, -0 included).
POSEIDON_HOST_DEVICE inline float biased(float y, const float* bias, size_t channel, bool relu) {
  const float v = bias ? y + bias[channel] : y;
  return relu ? (v > 0.f ? v : 0.f) : v;
}

// The fused ReLU's backward read at its output: the gradient passes where
// the output is positive.
POSEIDON_HOST_DEVICE inline float relu_masked(float y, float dy) { return y > 0.f ? dy : 0.f; }

// out[(i * channels + c) * inner + j] = biased(y[same], bias, c, relu) for
// i < outer, j < inner; y in float32 (it may be out) or bfloat16 bits.
void bias_epilogue_reference(float* out, const float* y, const float* bias, size_t outer, size_t channels, size_t inner,
                             bool relu);
void bias_epilogue_reference(float* out, const uint16_t* y, const float* bias, size_t outer, size_t channels,
                             size_t inner, bool relu);
// dy[i] = relu_masked(y[i], dy[i]).
void relu_mask_reference(const float* y, float* dy, size_t n);

}  // namespace poseidon
