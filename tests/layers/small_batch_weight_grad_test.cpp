// The fc layer's small-batch bf16 weight gradient (layers/small_batch_weight_grad.h)
// against sums in double over the same bfloat16 operands: the products are
// exact in float32, and float32 sums of at most 32 terms stay within
// 31 * 2^-24 (under 2e-6) of the sum of the terms' magnitudes; on
// odd batches (the last pair padded), columns that leave a partial block,
// rows that leave a partial block, aligned and unaligned outputs.
#include "layers/small_batch_weight_grad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "uniform_values.h"

namespace poseidon::testing {
namespace {

struct Extent {
  int64_t batch, features, outputs;
};

std::vector<uint16_t> random_bf16(int64_t count, uint64_t seed) {
  std::vector<uint16_t> v;
  for (float x : uniform_values(count, seed, 2.f)) v.push_back(to_bf16(x));
  return v;
}

std::vector<float> random_floats(int64_t count, uint64_t seed) { return uniform_values(count, seed, 2.f); }

// Runs `grad` into dW 64-byte aligned and then 4 bytes past it, and checks
// every output against the double sum of term(n, o, f), and that nothing is
// written past dW.
template <class Grad, class Term>
void expect_sums(const Extent& e, Grad grad, Term term) {
  for (const int64_t offset : {0, 1}) {
    std::vector<float> storage(e.outputs * e.features + 32, -7.f);
    float* dw = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 / 4 + offset;
    grad(dw);
    for (int64_t o = 0; o < e.outputs; ++o)
      for (int64_t f = 0; f < e.features; ++f) {
        double sum = 0, magnitude = 0;
        for (int64_t n = 0; n < e.batch; ++n) {
          sum += term(n, o, f);
          magnitude += std::abs(term(n, o, f));
        }
        ASSERT_NEAR(dw[o * e.features + f], sum, 2e-6 * magnitude + 1e-30)
            << "dw[" << o << "][" << f << "], offset " << offset;
      }
    EXPECT_EQ(dw[e.outputs * e.features], -7.f);
  }
}

class SmallBatchWeightGrad : public ::testing::TestWithParam<Extent> {};

TEST_P(SmallBatchWeightGrad, Bf16MatchesSumsOfTheRoundedOperands) {
  if (!Bf16WeightGrad::supported()) GTEST_SKIP() << "no AMX for bfloat16 on this CPU";
  const Extent e = GetParam();
  const std::vector<uint16_t> dy = random_bf16(e.batch * e.outputs, 1), x = random_bf16(e.batch * e.features, 2);
  Bf16WeightGrad grad(e.batch, e.features, e.outputs);
  expect_sums(
      e, [&](float* dw) { grad.run(dy.data(), x.data(), dw); },
      [&](int64_t n, int64_t o, int64_t f) {
        return double(from_bf16(dy[n * e.outputs + o])) * from_bf16(x[n * e.features + f]);
      });
}

TEST_P(SmallBatchWeightGrad, Float32MatchesSums) {
  if (!f32_weight_grad_supported()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const Extent e = GetParam();
  const std::vector<float> dy = random_floats(e.batch * e.outputs, 3), x = random_floats(e.batch * e.features, 4);
  expect_sums(
      e, [&](float* dw) { f32_weight_grad(dy.data(), x.data(), e.batch, e.features, e.outputs, dw); },
      [&](int64_t n, int64_t o, int64_t f) { return double(dy[n * e.outputs + o]) * x[n * e.features + f]; });
}

INSTANTIATE_TEST_SUITE_P(Shapes, SmallBatchWeightGrad,
                         ::testing::Values(Extent{1, 5, 3}, Extent{7, 70, 9}, Extent{32, 100, 33}, Extent{32, 4096, 20},
                                           Extent{16, 64, 4}, Extent{31, 130, 6}));

}  // namespace
}  // namespace poseidon::testing
