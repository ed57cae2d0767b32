// GELU, PyTorch's nn.GELU: y = x * Phi(x), Phi the standard normal CDF, in
// its exact form 0.5 x (1 + erf(x / sqrt 2)) (approximate: none) or the tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate:
// tanh). Derivatives as PyTorch's backward computes them. The arithmetic is
// shared by the CPU layer (gelu.cpp) and its kernels (gelu.cu).
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "layers/activation.h"

namespace poseidon {

struct GeluMath {
  static constexpr int64_t flops = 10;
  static constexpr float kSqrtHalf = 0.70710678118654752440f;   // 1 / sqrt(2)
  static constexpr float kPdfScale = 0.39894228040143267794f;   // 1 / sqrt(2 pi)
  static constexpr float kTanhScale = 0.79788456080286535588f;  // sqrt(2 / pi)
  static constexpr float kCubic = 0.044715f;

  explicit GeluMath(const ConfigNode& config)
      : tanh_form(config.get_choice("approximate", {"none", "tanh"}, "none") == "tanh") {}

  POSEIDON_HOST_DEVICE float forward(float x) const {
    if (tanh_form) return 0.5f * x * (1.f + tanhf(kTanhScale * (x + kCubic * x * x * x)));
    return x * 0.5f * (1.f + erff(x * kSqrtHalf));
  }
  POSEIDON_HOST_DEVICE float slope(float x, float) const {
    if (tanh_form) {
      const float t = tanhf(kTanhScale * (x + kCubic * x * x * x));
      return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kTanhScale * (1.f + 3.f * kCubic * x * x);
    }
    return 0.5f * (1.f + erff(x * kSqrtHalf)) + x * kPdfScale * expf(-0.5f * x * x);
  }

  bool tanh_form;
};

using GeluLayer = ActivationLayer<GeluMath>;

}  // namespace poseidon
