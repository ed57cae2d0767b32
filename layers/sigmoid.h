// Sigmoid: y = 1 / (1 + exp(-x)); dy/dx = y * (1 - y). The arithmetic is
// shared by the CPU layer (sigmoid.cpp) and its kernels (sigmoid.cu).
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "layers/activation.h"

namespace poseidon {

struct SigmoidMath {
  static constexpr int64_t flops = 4;
  explicit SigmoidMath(const ConfigNode&) {}
  POSEIDON_HOST_DEVICE float forward(float x) const { return 1.f / (1.f + expf(-x)); }
  POSEIDON_HOST_DEVICE float slope(float, float y) const { return y * (1.f - y); }
};

using SigmoidLayer = ActivationLayer<SigmoidMath>;

}  // namespace poseidon
