// The ReLU's backward mask on bfloat16 (layers/relu_kernels.h), which tests
// the output's bits rather than widening it: for every one of the 65,536
// bfloat16 outputs (normals, subnormals, both zeros, infinities, NaNs) it
// keeps the gradient exactly where the widened output is positive, as the
// float32 mask does, at lengths that leave vector tails.
#include "layers/relu_kernels.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/bf16.h"

namespace poseidon {
namespace {

TEST(ReluKernels, Bf16MaskKeepsTheGradientWhereTheWidenedOutputIsPositive) {
  const int64_t n = 65536;
  std::vector<uint16_t> y(n), dy(n);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = uint16_t(i);
    dy[i] = uint16_t(0x3f80 + i % 97);  // nonzero gradients
  }
  std::vector<uint16_t> masked = dy;
  relu_grad_in_place(y.data(), masked.data(), n);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool positive = from_bf16(y[i]) > 0.f;
    EXPECT_EQ(masked[i], positive ? dy[i] : uint16_t(0)) << "y bits 0x" << std::hex << i;
    kept += positive;
  }
  EXPECT_EQ(kept, 0x7f80);  // 1 to 0x7f80: every positive finite value and +infinity
}

TEST(ReluKernels, Bf16MaskMatchesTheFloat32MaskOnOddLengths) {
  for (int64_t n : {1, 15, 33, 1001}) {
    std::vector<uint16_t> y(n), dy(n);
    std::vector<float> yf(n), dyf(n);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = to_bf16(float((i * 37) % 11) - 5.f);
      dy[i] = to_bf16(float(i) + 0.5f);
      yf[i] = from_bf16(y[i]);
      dyf[i] = from_bf16(dy[i]);
    }
    relu_grad_in_place(y.data(), dy.data(), n);
    relu_grad_in_place(yf.data(), dyf.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(from_bf16(dy[i]), dyf[i]) << n << " at " << i;
  }
}

}  // namespace
}  // namespace poseidon
