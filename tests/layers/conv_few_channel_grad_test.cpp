// The few-channel convolution weight gradient (layers/conv_few_channel_grad.h)
// and the bias gradient beside it against direct sums in double over the
// same float32 operands: grey and
// RGB inputs, with and without padding, output counts that leave a partial
// block of 4, kernel widths that leave partial blocks of 3 columns (1, 2, 5,
// 7), rows that end in a partial vector or are shorter than one; the same
// bits with one thread as with several; and the geometries it refuses.
#include "layers/conv_few_channel_grad.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "uniform_values.h"

namespace poseidon::testing {
namespace {

struct Case {
  std::string label;
  int64_t batch, channels, height, width, outputs, kernel_h, kernel_w, pad_h = 0, pad_w = 0;

  ConvGeometry geometry() const {
    return {.channels = channels,
            .height = height,
            .width = width,
            .kernel_h = kernel_h,
            .kernel_w = kernel_w,
            .pad_h = pad_h,
            .pad_w = pad_w};
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

class FewChannelGrad : public ::testing::TestWithParam<Case> {};

TEST_P(FewChannelGrad, MatchesDirectSums) {
  const Case& k = GetParam();
  const ConvGeometry g = k.geometry();
  ASSERT_TRUE(FewChannelWeightGrad::suits(g, 1));
  const int64_t oh = g.out_height(), ow = g.out_width();
  const std::vector<float> x = uniform_values(k.batch * g.image_size(), 11, 1.f);
  const std::vector<float> dy = uniform_values(k.batch * k.outputs * oh * ow, 12, 1.f);
  std::vector<float> dw(k.outputs * g.col_rows(), 99.f), db(k.outputs, 99.f);
  FewChannelWeightGrad grad(g, k.batch, k.outputs);
  grad.run(x.data(), dy.data(), dw.data(), db.data());
  // float32 sums in 8 lanes, then of the lanes: under (terms / 8 + 8)
  // roundings of 2^-24 each, relative to the terms' magnitudes.
  auto bound = [](int64_t terms, double magnitude) {
    return (terms / 8.0 + 8.0) * std::ldexp(1.0, -24) * magnitude + 1e-30;
  };
  for (int64_t o = 0; o < k.outputs; ++o) {
    double want = 0, magnitude = 0;
    for (int64_t n = 0; n < k.batch; ++n)
      for (int64_t p = 0; p < oh * ow; ++p) {
        want += dy[(n * k.outputs + o) * oh * ow + p];
        magnitude += std::abs(dy[(n * k.outputs + o) * oh * ow + p]);
      }
    ASSERT_NEAR(db[o], want, bound(k.batch * oh * ow, magnitude)) << "db[" << o << "]";
  }

  for (int64_t o = 0; o < k.outputs; ++o)
    for (int64_t c = 0; c < k.channels; ++c)
      for (int64_t i = 0; i < k.kernel_h; ++i)
        for (int64_t j = 0; j < k.kernel_w; ++j) {
          double want = 0, magnitude = 0;
          int64_t terms = 0;
          for (int64_t n = 0; n < k.batch; ++n)
            for (int64_t y = 0; y < oh; ++y)
              for (int64_t xo = 0; xo < ow; ++xo) {
                const int64_t iy = y + i - k.pad_h, ix = xo + j - k.pad_w;
                if (iy < 0 || iy >= k.height || ix < 0 || ix >= k.width) continue;
                const double term = double(dy[((n * k.outputs + o) * oh + y) * ow + xo]) *
                                    x[((n * k.channels + c) * k.height + iy) * k.width + ix];
                want += term;
                magnitude += std::abs(term);
                ++terms;
              }
          const float got = dw[((o * k.channels + c) * k.kernel_h + i) * k.kernel_w + j];
          ASSERT_NEAR(got, want, bound(terms, magnitude)) << "dw[" << o << "][" << c << "][" << i << "][" << j << "]";
        }
}

TEST_P(FewChannelGrad, SameBitsWithOneThread) {
  const Case& k = GetParam();
  const ConvGeometry g = k.geometry();
  const std::vector<float> x = uniform_values(k.batch * g.image_size(), 21, 1.f);
  const std::vector<float> dy = uniform_values(k.batch * k.outputs * g.col_cols(), 22, 1.f);
  std::vector<float> many(k.outputs * g.col_rows()), one(many.size()), db_many(k.outputs), db_one(k.outputs);
  FewChannelWeightGrad grad(g, k.batch, k.outputs);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  grad.run(x.data(), dy.data(), many.data(), db_many.data());
  omp_set_num_threads(1);
  grad.run(x.data(), dy.data(), one.data(), db_one.data());
  omp_set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(many[i], one[i]) << "dw element " << i;
  for (int64_t o = 0; o < k.outputs; ++o) ASSERT_EQ(db_many[o], db_one[o]) << "db element " << o;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FewChannelGrad,
                         ::testing::Values(Case{"grey_lenet_first_layer", 3, 1, 28, 28, 20, 5, 5},
                                           Case{"rgb_padded_partial_blocks", 2, 3, 11, 13, 7, 5, 5, 2, 2},
                                           Case{"two_channels_kernel_7x1", 2, 2, 12, 9, 5, 7, 1, 3, 0},
                                           Case{"rgb_kernel_1x7_pad", 2, 3, 6, 21, 9, 1, 7, 0, 3},
                                           Case{"grey_kernel_2x2_narrow", 4, 1, 5, 6, 3, 2, 2},
                                           Case{"rgb_3x3_pad1", 2, 3, 16, 16, 32, 3, 3, 1, 1}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

TEST(FewChannelGrad, RefusesWhatItDoesNotCompute) {
  ConvGeometry g{.channels = 3, .height = 10, .width = 10, .kernel_h = 3, .kernel_w = 3};
  EXPECT_TRUE(FewChannelWeightGrad::suits(g, 1));
  EXPECT_FALSE(FewChannelWeightGrad::suits(g, 3)) << "groups";
  ConvGeometry wide = g, strided = g, dilated = g;
  wide.channels = 4;
  strided.stride_w = 2;
  dilated.dilation_h = 2;
  EXPECT_FALSE(FewChannelWeightGrad::suits(wide, 1)) << "4 channels";
  EXPECT_FALSE(FewChannelWeightGrad::suits(strided, 1)) << "stride 2";
  EXPECT_FALSE(FewChannelWeightGrad::suits(dilated, 1)) << "dilation 2";
}

}  // namespace
}  // namespace poseidon::testing
