// Test values put on the first GPU as float32 or bfloat16 tensors, for the
// tests that compare a kernel with its CPU reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace poseidon::testing {

inline Tensor on_gpu(const std::vector<float>& values) {
  Tensor host({static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), host.data());
  return host.to(Device::cuda(0));
}

inline Tensor on_gpu(const std::vector<uint16_t>& bits) {
  Tensor host({static_cast<int64_t>(bits.size())}, Device{}, DType::bf16);
  std::copy(bits.begin(), bits.end(), host.bf16_data());
  return host.to(Device::cuda(0));
}

}  // namespace poseidon::testing
