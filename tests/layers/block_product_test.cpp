// The cache-resident matrix product and transpose that the Winograd engine
// runs block by block (layers/block_product.h) against plain loops: row
// counts that leave 1 to 3 rows past the 4-row register blocks, column
// counts that end in 8- and 16-column panels, padded leading dimensions,
// accumulation onto what c holds, and transposes with edges in both
// directions. Cells outside the result must keep their values.
#include "layers/block_product.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "uniform_values.h"

namespace poseidon::testing {
namespace {

constexpr float kSentinel = 1234.5f;

class BlockProduct : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, bool>> {};

TEST_P(BlockProduct, MatchesPlainLoops) {
  const auto [rows, depth, cols, accumulate] = GetParam();
  const int64_t lda = depth + 3, ldb = cols + 5, ldc = cols + 8;
  const std::vector<float> a = uniform_values(rows * lda, 1, 1.f), b = uniform_values(depth * ldb, 2, 1.f);
  std::vector<float> c = uniform_values(rows * ldc, 3, 1.f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = cols; j < ldc; ++j) c[i * ldc + j] = kSentinel;
  const std::vector<float> before = c;
  block_product(a.data(), lda, rows, depth, b.data(), ldb, cols, c.data(), ldc, accumulate);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double want = accumulate ? before[i * ldc + j] : 0.0, scale = std::abs(want);
      for (int64_t k = 0; k < depth; ++k) {
        want += double(a[i * lda + k]) * b[k * ldb + j];
        scale += std::abs(double(a[i * lda + k]) * b[k * ldb + j]);
      }
      // float32 sums of `depth` products: a few units of rounding per term.
      ASSERT_NEAR(c[i * ldc + j], want, 1e-6 * (depth + 1) * scale + 1e-30) << "c[" << i << "][" << j << "]";
    }
    for (int64_t j = cols; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], kSentinel) << "padding c[" << i << "][" << j << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockProduct,
                         ::testing::Combine(::testing::Values(1, 3, 4, 6, 13), ::testing::Values(1, 17, 64),
                                            ::testing::Values(8, 16, 24, 56), ::testing::Bool()));

TEST(BlockProduct, RefusesColumnsOutsideWholeVectors) {
  std::vector<float> a(4, 1.f), b(12, 1.f), c(12, 0.f);
  EXPECT_THROW(block_product(a.data(), 1, 1, 1, b.data(), 12, 12, c.data(), 12, false), InternalError);
}

class BlockTranspose : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(BlockTranspose, MovesEveryElementAndNothingElse) {
  const auto [rows, cols] = GetParam();
  const int64_t ld_in = cols + 3, ld_out = rows + 9;
  const std::vector<float> in = uniform_values(rows * ld_in, 4, 1.f);
  std::vector<float> out(cols * ld_out, kSentinel);
  transpose_block(in.data(), ld_in, rows, cols, out.data(), ld_out);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < ld_out; ++i) {
      if (i < rows)
        ASSERT_EQ(out[j * ld_out + i], in[i * ld_in + j]) << "out[" << j << "][" << i << "]";
      else
        ASSERT_EQ(out[j * ld_out + i], kSentinel) << "padding out[" << j << "][" << i << "]";
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockTranspose,
                         ::testing::Combine(::testing::Values(1, 7, 8, 9, 20, 33), ::testing::Values(1, 8, 13, 16, 56)));

}  // namespace
}  // namespace poseidon::testing
