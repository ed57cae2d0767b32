// The CPU casts between float32 and bfloat16 blobs (core/blob_types.h):
// the parallel forms and the serial ones that callers inside a parallel
// loop use give core/bf16.h's from_bf16 and to_bf16 of every element (and
// of every float32 sum, for the bfloat16 add), on lengths that end in a
// partial vector.
#include "core/blob_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/bf16.h"

namespace poseidon::testing {
namespace {

TEST(BlobTypeCasts, WideningEveryBfloat16PatternIsExact) {
  std::vector<uint16_t> all(65536 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  const int64_t n = static_cast<int64_t>(all.size());
  std::vector<float> parallel(n, -1.f), serial(n, -1.f);
  widen_bf16(all.data(), parallel.data(), n);
  widen_bf16_serially(all.data(), serial.data(), n);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t want = static_cast<uint32_t>(all[i]) << 16, got_parallel, got_serial;
    std::memcpy(&got_parallel, &parallel[i], 4);
    std::memcpy(&got_serial, &serial[i], 4);
    wrong += got_parallel != want || got_serial != want;
  }
  EXPECT_EQ(wrong, 0);
}

// Random floats of every exponent, ties to even, NaNs with payloads,
// infinities and subnormals.
std::vector<float> awkward_floats(int64_t n) {
  std::mt19937 rng(5);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = rng();
    if (i % 11 == 3) bits = (bits & 0xffff0000u) | 0x8000u;           // a tie
    if (i % 13 == 4) bits = 0x7f800000u | (bits & 0x007fffffu) | 1u;  // a NaN
    if (i % 17 == 5) bits &= 0x807fffffu;                             // a subnormal
    if (i == 6) bits = 0x7f800000u;
    if (i == 7) bits = 0xff800000u;
    std::memcpy(&v[i], &bits, 4);
  }
  return v;
}

TEST(BlobTypeCasts, RoundingIsToBf16OfEachElementInBothForms) {
  for (const int64_t n : {int64_t{5}, int64_t{8192 + 13}, int64_t{3 * 65536 + 9}}) {
    SCOPED_TRACE("length " + std::to_string(n));
    const std::vector<float> v = awkward_floats(n);
    std::vector<uint16_t> parallel(n, 0xdead), serial(n, 0xdead);
    round_into_bf16(v.data(), parallel.data(), n);
    round_into_bf16_serially(v.data(), serial.data(), n);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += parallel[i] != to_bf16(v[i]) || serial[i] != to_bf16(v[i]);
    EXPECT_EQ(wrong, 0);
  }
}

// Sums of two bfloat16 values near each other's size (so that most round)
// and of the awkward values above: to_bf16 of the float32 sum, in both forms
// (a NaN where the sum is one).
TEST(BlobTypeCasts, AddingBfloat16IsTheFloat32SumRoundedInBothForms) {
  for (const int64_t n : {int64_t{5}, int64_t{8192 + 13}, int64_t{3 * 65536 + 9}}) {
    SCOPED_TRACE("length " + std::to_string(n));
    const std::vector<float> a = awkward_floats(n);
    std::vector<uint16_t> from(n), to(n);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> unit(-1.f, 1.f);
    for (int64_t i = 0; i < n; ++i) {
      from[i] = to_bf16(i % 3 == 0 ? a[i] : unit(rng));
      to[i] = to_bf16(i % 5 == 0 ? a[(i * 7) % n] : unit(rng));
    }
    std::vector<uint16_t> parallel = to, serial = to;
    add_rounded_into_bf16(from.data(), parallel.data(), n);
    add_rounded_into_bf16_serially(from.data(), serial.data(), n);
    int64_t wrong = 0, rounded = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float sum = from_bf16(to[i]) + from_bf16(from[i]);
      if (std::isnan(sum))  // which payload a sum of two NaNs keeps depends on the operands' order
        wrong += !std::isnan(from_bf16(parallel[i])) || !std::isnan(from_bf16(serial[i]));
      else
        wrong += parallel[i] != to_bf16(sum) || serial[i] != to_bf16(sum);
      rounded += from_bf16(to_bf16(sum)) != sum;
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(rounded, n / 4);  // the values do exercise the rounding
  }
}

}  // namespace
}  // namespace poseidon::testing
