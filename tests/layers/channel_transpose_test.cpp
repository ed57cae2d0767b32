// The NCHW <-> NHWC tile transposes of the conv layer's oneDNN path against
// index arithmetic, on pixel counts that leave partial tiles, several
// channel tiles and images, channel counts that take 16-channel (AVX-512) or
// only 8-channel (AVX2) tiles, and as the blocked layouts nChw16c and nChw8c;
// their bfloat16 rounding (nearest even, NaN kept) against the bit rule,
// their widening of bfloat16 back to float32, and their moves between
// bfloat16 tensors (words unchanged, sums rounded once).
#include "layers/channel_transpose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "uniform_values.h"

namespace poseidon::testing {
namespace {

std::vector<float> random_values(int64_t count, uint64_t seed) { return uniform_values(count, seed, 4.f); }

int64_t nhwc_index(const NhwcShape& s, int64_t n, int64_t c, int64_t p) { return (n * s.pixels + p) * s.channels + c; }
int64_t nchw_index(const NhwcShape& s, int64_t n, int64_t c, int64_t p) { return (n * s.channels + c) * s.pixels + p; }

uint16_t bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

class NhwcTranspose : public ::testing::TestWithParam<NhwcShape> {
 protected:
  void SetUp() override {
    if (!nhwc_transpose_supported(GetParam())) GTEST_SKIP() << "no AVX2 on this CPU";
  }
};

TEST_P(NhwcTranspose, ToNhwcPlacesEveryElement) {
  const NhwcShape s = GetParam();
  const std::vector<float> src = random_values(s.batch * s.channels * s.pixels, 1);
  std::vector<float> dst(src.size(), -100.f);
  nchw_to_nhwc(src.data(), s, dst.data());
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t p = 0; p < s.pixels; ++p)
        ASSERT_EQ(dst[nhwc_index(s, n, c, p)], src[nchw_index(s, n, c, p)]) << n << " " << c << " " << p;
}

TEST_P(NhwcTranspose, ToNhwcBf16RoundsEveryElement) {
  const NhwcShape s = GetParam();
  const std::vector<float> src = random_values(s.batch * s.channels * s.pixels, 2);
  std::vector<uint16_t> dst(src.size(), 0);
  nchw_to_nhwc_bf16(src.data(), s, dst.data());
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t p = 0; p < s.pixels; ++p)
        ASSERT_EQ(dst[nhwc_index(s, n, c, p)], bf16_bits(src[nchw_index(s, n, c, p)])) << n << " " << c << " " << p;
}

TEST_P(NhwcTranspose, ToNchwOverwritesOrAdds) {
  const NhwcShape s = GetParam();
  const std::vector<float> src = random_values(s.batch * s.channels * s.pixels, 3);
  const std::vector<float> before = random_values(src.size(), 4);
  std::vector<float> set = before, added = before;
  nhwc_to_nchw(src.data(), s, set.data(), false);
  nhwc_to_nchw(src.data(), s, added.data(), true);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t p = 0; p < s.pixels; ++p) {
        const int64_t i = nchw_index(s, n, c, p);
        const float v = src[nhwc_index(s, n, c, p)];
        ASSERT_EQ(set[i], v) << n << " " << c << " " << p;
        ASSERT_EQ(added[i], before[i] + v) << n << " " << c << " " << p;
      }
}

// Bfloat16 words (random ones, signs and exponents included) widen exactly:
// the float whose upper half they are.
TEST_P(NhwcTranspose, Bf16ToNchwWidensExactlyAndOverwritesOrAdds) {
  const NhwcShape s = GetParam();
  const std::vector<float> values = random_values(s.batch * s.channels * s.pixels, 7);
  std::vector<uint16_t> src(values.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = bf16_bits(std::ldexp(values[i], static_cast<int>(i % 9) - 4));
  const std::vector<float> before = random_values(src.size(), 6);
  std::vector<float> set = before, added = before;
  nhwc_bf16_to_nchw(src.data(), s, set.data(), false);
  nhwc_bf16_to_nchw(src.data(), s, added.data(), true);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t p = 0; p < s.pixels; ++p) {
        const int64_t i = nchw_index(s, n, c, p);
        const uint32_t bits = static_cast<uint32_t>(src[nhwc_index(s, n, c, p)]) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        ASSERT_EQ(set[i], v) << n << " " << c << " " << p;
        ASSERT_EQ(added[i], before[i] + v) << n << " " << c << " " << p;
      }
}

float widened(uint16_t word) {
  const uint32_t bits = static_cast<uint32_t>(word) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Bfloat16 words of random signs and exponents.
std::vector<uint16_t> random_words(int64_t count, uint64_t seed) {
  const std::vector<float> values = random_values(count, seed);
  std::vector<uint16_t> words(values.size());
  for (size_t i = 0; i < words.size(); ++i) words[i] = bf16_bits(std::ldexp(values[i], static_cast<int>(i % 9) - 4));
  return words;
}

// Between bfloat16 tensors every word lands unchanged at its place.
TEST_P(NhwcTranspose, Bf16ToNhwcBf16MovesEveryWord) {
  const NhwcShape s = GetParam();
  const std::vector<uint16_t> src = random_words(s.batch * s.channels * s.pixels, 8);
  std::vector<uint16_t> dst(src.size(), 0xffff);
  nchw_bf16_to_nhwc_bf16(src.data(), s, dst.data());
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t p = 0; p < s.pixels; ++p)
        ASSERT_EQ(dst[nhwc_index(s, n, c, p)], src[nchw_index(s, n, c, p)]) << n << " " << c << " " << p;
}

// Back to NCHW: the words themselves, or the float32 sum of each with the
// word it lands on, rounded once to nearest even (the sums of words of
// different exponents need rounding; ties come up among them).
TEST_P(NhwcTranspose, Bf16ToNchwBf16OverwritesOrAddsRoundedOnce) {
  const NhwcShape s = GetParam();
  const std::vector<uint16_t> src = random_words(s.batch * s.channels * s.pixels, 9);
  const std::vector<uint16_t> before = random_words(src.size(), 10);
  std::vector<uint16_t> set = before, added = before;
  nhwc_bf16_to_nchw_bf16(src.data(), s, set.data(), false);
  nhwc_bf16_to_nchw_bf16(src.data(), s, added.data(), true);
  int64_t inexact = 0;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t p = 0; p < s.pixels; ++p) {
        const int64_t i = nchw_index(s, n, c, p);
        const uint16_t word = src[nhwc_index(s, n, c, p)];
        const float sum = widened(before[i]) + widened(word);
        ASSERT_EQ(set[i], word) << n << " " << c << " " << p;
        ASSERT_EQ(added[i], bf16_bits(sum)) << n << " " << c << " " << p;
        inexact += widened(bf16_bits(sum)) != sum;
      }
  EXPECT_GT(inexact, 0) << "no sum needed rounding";
}

INSTANTIATE_TEST_SUITE_P(Shapes, NhwcTranspose,
                         ::testing::Values(NhwcShape{.batch = 1, .channels = 16, .pixels = 16},
                                           NhwcShape{.batch = 2, .channels = 32, .pixels = 9},     // one partial tile
                                           NhwcShape{.batch = 3, .channels = 48, .pixels = 5625},  // 75x75
                                           NhwcShape{.batch = 2, .channels = 128, .pixels = 64},
                                           NhwcShape{.batch = 1, .channels = 8, .pixels = 8},  // 8-channel tiles
                                           NhwcShape{.batch = 2, .channels = 24, .pixels = 13},
                                           NhwcShape{.batch = 3, .channels = 40, .pixels = 289}),
                         [](const ::testing::TestParamInfo<NhwcShape>& info) {
                           const NhwcShape& s = info.param;
                           return "n" + std::to_string(s.batch) + "_c" + std::to_string(s.channels) + "_p" +
                                  std::to_string(s.pixels);
                         });

// The conv layer moves nChw16c and nChw8c activations (oneDNN's channel
// blocks) as NHWC of N * C / B images of B channels: there and back, every
// element lands at its blocked offset ((n * C / B + c / B) * pixels + p) * B
// + c % B.
class NhwcTransposeBlocks : public ::testing::TestWithParam<int64_t> {};

TEST_P(NhwcTransposeBlocks, ChannelSlabsAreTheBlockedLayout) {
  const int64_t block = GetParam();
  const NhwcShape plain{.batch = 2, .channels = 48, .pixels = 21};  // a partial pixel tile
  const NhwcShape slabs{.batch = plain.batch * plain.channels / block, .channels = block, .pixels = plain.pixels};
  if (!nhwc_transpose_supported(slabs)) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<float> src = random_values(plain.batch * plain.channels * plain.pixels, 5);
  std::vector<float> blocked(src.size(), -100.f), back(src.size(), -100.f);
  std::vector<uint16_t> blocked_bf16(src.size(), 0), words(src.size()), blocked_words(src.size()),
      back_words(src.size());
  for (size_t i = 0; i < src.size(); ++i) words[i] = bf16_bits(src[i]);
  nchw_to_nhwc(src.data(), slabs, blocked.data());
  nchw_to_nhwc_bf16(src.data(), slabs, blocked_bf16.data());
  nhwc_to_nchw(blocked.data(), slabs, back.data(), false);
  nchw_bf16_to_nhwc_bf16(words.data(), slabs, blocked_words.data());
  nhwc_bf16_to_nchw_bf16(blocked_words.data(), slabs, back_words.data(), false);
  for (int64_t n = 0; n < plain.batch; ++n)
    for (int64_t c = 0; c < plain.channels; ++c)
      for (int64_t p = 0; p < plain.pixels; ++p) {
        const int64_t at = ((n * plain.channels / block + c / block) * plain.pixels + p) * block + c % block;
        const int64_t i = nchw_index(plain, n, c, p);
        ASSERT_EQ(blocked[at], src[i]) << n << " " << c << " " << p;
        ASSERT_EQ(blocked_bf16[at], bf16_bits(src[i])) << n << " " << c << " " << p;
        ASSERT_EQ(back[i], src[i]) << n << " " << c << " " << p;
        ASSERT_EQ(blocked_words[at], words[i]) << n << " " << c << " " << p;
        ASSERT_EQ(back_words[i], words[i]) << n << " " << c << " " << p;
      }
}

INSTANTIATE_TEST_SUITE_P(Blocks, NhwcTransposeBlocks, ::testing::Values(16, 8),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "nChw" + std::to_string(info.param) + "c";
                         });

// Rounding to bfloat16 in either tile width: 16 channels take AVX-512's
// kernels where the CPU has them, 8 channels AVX2's.
class NhwcTransposeBf16 : public ::testing::TestWithParam<int64_t> {};

TEST_P(NhwcTransposeBf16, RoundsTiesToEvenAndKeepsSpecials) {
  // 16 values as 16 channels of one pixel, or as 2 images of 8 channels.
  const int64_t channels = GetParam();
  const NhwcShape s{.batch = 16 / channels, .channels = channels, .pixels = 1};
  if (!nhwc_transpose_supported(s)) GTEST_SKIP() << "no AVX2 on this CPU";
  auto from_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  const std::vector<float> src = {from_bits(0x3f808000),  // tie, even below: rounds down to 0x3f80
                                  from_bits(0x3f818000),  // tie, odd below: rounds up to 0x3f82
                                  from_bits(0x3f808001),  // above the tie: up
                                  from_bits(0x3f807fff),  // below the tie: down
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  from_bits(0x7f800001),  // NaN whose payload lies only in the low bits
                                  std::numeric_limits<float>::quiet_NaN(),
                                  from_bits(0x7f7fffff),  // the largest float rounds to infinity, as in oneDNN
                                  0.f,
                                  -0.f,
                                  1.f,
                                  -1.5f,
                                  from_bits(0x00000001),  // smallest subnormal
                                  3.14159265f,
                                  -2.71828183f};
  std::vector<uint16_t> dst(16);
  nchw_to_nhwc_bf16(src.data(), s, dst.data());
  const std::vector<uint16_t> want = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0xff80, 0x7fc0, 0x7fc0,
                                      0x7f80, 0x0000, 0x8000, 0x3f80, 0xbfc0, 0x0000, 0x4049, 0xc02e};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(dst[i], want[i]) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Tiles, NhwcTransposeBf16, ::testing::Values(16, 8),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "c" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace poseidon::testing
