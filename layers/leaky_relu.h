// Leaky ReLU, PyTorch's nn.LeakyReLU: y = x for x > 0, negative_slope * x
// otherwise; the gradient follows the same split. The arithmetic is shared
// by the CPU layer (leaky_relu.cpp) and its kernels (leaky_relu.cu).
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "layers/activation.h"

namespace poseidon {

struct LeakyReluMath {
  static constexpr int64_t flops = 1;
  explicit LeakyReluMath(const ConfigNode& config)
      : negative_slope(static_cast<float>(config.get_double("negative_slope", 0.01))) {}
  POSEIDON_HOST_DEVICE float forward(float x) const { return x > 0.f ? x : x * negative_slope; }
  POSEIDON_HOST_DEVICE float slope(float x, float) const { return x > 0.f ? 1.f : negative_slope; }

  float negative_slope;
};

using LeakyReluLayer = ActivationLayer<LeakyReluMath>;

}  // namespace poseidon
