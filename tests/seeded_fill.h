// Values in [-1, 1) from one seeded generator, for tests that run a layer
// more than once on identical inputs and parameters: the same seed and the
// same order of fills give the same values.
#pragma once

#include <cstdint>
#include <random>

#include "core/layer.h"

namespace poseidon::testing {

class SeededFill {
 public:
  explicit SeededFill(uint64_t seed) : rng_(seed) {}

  void fill(Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = uniform_(rng_);
  }
  // Gives every parameter of `layer` a value, filled, and a gradient.
  void fill_params(Layer& layer) {
    for (Param& p : layer.params()) {
      p.value = Tensor(p.shape);
      p.grad = Tensor(p.shape);
      fill(p.value);
    }
  }

 private:
  std::mt19937_64 rng_;
  std::uniform_real_distribution<float> uniform_{-1.f, 1.f};
};

}  // namespace poseidon::testing
