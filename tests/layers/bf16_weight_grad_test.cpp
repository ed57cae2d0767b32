// The fc layer's small-batch bf16 weight gradient (layers/bf16_weight_grad.h)
// against sums in double over the same bfloat16 operands: the products are
// exact in float32, and float32 sums of at most 32 terms stay within
// 31 * 2^-24 (under 2e-6) of the sum of the terms' magnitudes; on
// odd batches (the last pair padded), columns that leave a partial block,
// rows that leave a partial block, aligned and unaligned outputs.
#include "layers/bf16_weight_grad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/bf16.h"

namespace poseidon::testing {
namespace {

struct Extent {
  int64_t batch, features, outputs;
};

std::vector<uint16_t> random_bf16(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-2.f, 2.f);
  std::vector<uint16_t> v(count);
  for (uint16_t& b : v) b = to_bf16(uni(rng));
  return v;
}

class Bf16WeightGradTest : public ::testing::TestWithParam<Extent> {
 protected:
  void SetUp() override {
    if (!Bf16WeightGrad::supported()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  }
};

TEST_P(Bf16WeightGradTest, MatchesSumsOfTheRoundedOperands) {
  const Extent e = GetParam();
  const std::vector<uint16_t> dy = random_bf16(e.batch * e.outputs, 1), x = random_bf16(e.batch * e.features, 2);
  Bf16WeightGrad grad(e.batch, e.features, e.outputs);
  for (const int64_t offset : {0, 1}) {  // dw 64-byte aligned, then 4 bytes past
    std::vector<float> storage(e.outputs * e.features + 32, -7.f);
    float* dw = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 / 4 + offset;
    grad.run(dy.data(), x.data(), dw);
    for (int64_t o = 0; o < e.outputs; ++o)
      for (int64_t f = 0; f < e.features; ++f) {
        double sum = 0, magnitude = 0;
        for (int64_t n = 0; n < e.batch; ++n) {
          const double term = double(from_bf16(dy[n * e.outputs + o])) * from_bf16(x[n * e.features + f]);
          sum += term;
          magnitude += std::abs(term);
        }
        ASSERT_NEAR(dw[o * e.features + f], sum, 2e-6 * magnitude + 1e-30)
            << "dw[" << o << "][" << f << "], offset " << offset;
      }
    // Nothing written past dW.
    EXPECT_EQ(dw[e.outputs * e.features], -7.f);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16WeightGradTest,
                         ::testing::Values(Extent{1, 5, 3}, Extent{7, 70, 9}, Extent{32, 100, 33}, Extent{32, 4096, 20},
                                           Extent{16, 64, 4}, Extent{31, 130, 6}));

}  // namespace
}  // namespace poseidon::testing
