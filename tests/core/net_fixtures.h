// What the tests that run whole nets side by side share: a sink that drops
// gradient reports, the repository's model files, a deterministic batch, and
// an exact comparison of tensors.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "core/net.h"
#include "tools/cli/train_config.h"

namespace poseidon::testing {

struct NullSink : GradSink {
  void grad_ready(Param&) override {}
};

inline ConfigNode model_file(const std::string& name, const std::vector<std::string>& overrides = {}) {
  return load_model(std::string(POSEIDON_SOURCE_DIR) + "/models/" + name, overrides);
}

// Normal data and labels cycling through 0, 1, 2 in the net's first two inputs.
inline void feed(Net& net, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  Tensor& data = net.blob(net.input_names()[0]).value;
  Tensor& labels = net.blob(net.input_names()[1]).value;
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = normal(rng);
  for (int64_t i = 0; i < labels.numel(); ++i) labels[i] = static_cast<float>(i % 3);
}

// Of one type and equal element for element (a NaN equals nothing).
inline bool same_values(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(DType::f32), y = b.to(DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!(x[i] == y[i])) return false;
  return true;
}

}  // namespace poseidon::testing
