// Synthetic source: example i is a function of (seed, i) only.
#include "data/synthetic_source.h"

#include <random>

namespace poseidon {

int64_t SyntheticSource::read(int64_t index, float* dst, uint64_t) const {
  std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index));
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t n = shape_numel(shape_);
  for (int64_t i = 0; i < n; ++i) dst[i] = normal(rng);
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(classes_));
}

}  // namespace poseidon
