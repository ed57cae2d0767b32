// The CPU references of the bias epilogue (see bias_epilogue.h).
#include "core/bias_epilogue.h"

#include "core/bf16.h"

namespace poseidon {

namespace {

float value_of(float v) { return v; }
float value_of(uint16_t v) { return from_bf16(v); }

template <class T>
void epilogue(float* out, const T* y, const float* bias, size_t outer, size_t channels, size_t inner, bool relu) {
  for (size_t i = 0; i < outer; ++i)
    for (size_t c = 0; c < channels; ++c) {
      const size_t plane = (i * channels + c) * inner;
      for (size_t j = 0; j < inner; ++j) out[plane + j] = biased(value_of(y[plane + j]), bias, c, relu);
    }
}

}  // namespace

void bias_epilogue_reference(float* out, const float* y, const float* bias, size_t outer, size_t channels, size_t inner,
                             bool relu) {
  epilogue(out, y, bias, outer, channels, inner, relu);
}

void bias_epilogue_reference(float* out, const uint16_t* y, const float* bias, size_t outer, size_t channels,
                             size_t inner, bool relu) {
  epilogue(out, y, bias, outer, channels, inner, relu);
}

void relu_mask_reference(const float* y, float* dy, size_t n) {
  for (size_t i = 0; i < n; ++i) dy[i] = relu_masked(y[i], dy[i]);
}

}  // namespace poseidon
