// What the tests holding one engine of a layer against another share:
// operands drawn uniformly from [-1, 1] and a whole-tensor closeness check.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/tensor.h"

namespace poseidon::testing {

inline void fill_uniform(Tensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = uni(rng);
}

// Relative error of the whole tensor, ||got - want|| / ||want|| <= 1e-5 (the
// normalised error of ggml's backend tests): two engines sum the same
// products in different orders (or, Winograd, after transforms), and a sum of
// a thousand floats that cancels to near zero may differ there by more than
// 1e-5 of itself, while a single wrong element among a few thousand moves
// this ratio far above 1e-5. `engines` names the two sides in the message.
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what, const std::string& engines) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double diff = 0, norm = 0, worst = 0;
  int64_t worst_at = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = double(got[i]) - want[i];
    diff += d * d;
    norm += double(want[i]) * want[i];
    if (std::abs(d) > worst) worst = std::abs(d), worst_at = i;
  }
  EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm)) << what << ": largest difference at [" << worst_at << "] ("
                                                     << engines << "): " << got[worst_at] << " vs " << want[worst_at];
}

}  // namespace poseidon::testing
