// What the layout and kernel tests share: reproducible operands drawn
// uniformly from [-bound, bound].
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace poseidon::testing {

inline std::vector<float> uniform_values(int64_t count, uint64_t seed, float bound) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-bound, bound);
  std::vector<float> v(count);
  for (float& x : v) x = uni(rng);
  return v;
}

}  // namespace poseidon::testing
