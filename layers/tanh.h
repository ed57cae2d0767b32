// Hyperbolic tangent: y = tanh(x); dy/dx = 1 - y^2. The arithmetic is shared
// by the CPU layer (tanh.cpp) and its kernels (tanh.cu).
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "layers/activation.h"

namespace poseidon {

struct TanhMath {
  static constexpr int64_t flops = 4;
  explicit TanhMath(const ConfigNode&) {}
  POSEIDON_HOST_DEVICE float forward(float x) const { return tanhf(x); }
  POSEIDON_HOST_DEVICE float slope(float, float y) const { return 1.f - y * y; }
};

using TanhLayer = ActivationLayer<TanhMath>;

}  // namespace poseidon
