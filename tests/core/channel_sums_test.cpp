// The bias gradient's channel sums (core/channel_sums.h): the plan cuts every
// channel into chunks that cover its values once; the CPU reference equals
// a plain loop where every order gives the same float32 sum, stays within
// float32 rounding of the exact sum otherwise, and adds in the plan's order
// (a case whose result tells the orders apart). On a GPU the kernels
// (core/cuda/channel_sums.cu) equal the reference bit for bit, from float32
// and from bfloat16 values, on shapes that take every path: one and many
// chunks, strided and sequential, more channels than a grid's y dimension,
// and empty channels.
#include "core/channel_sums.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/device_memory.h"
#include "core/tensor.h"
#include "gpu_required.h"
#include "gpu_tensors.h"
#ifdef POSEIDON_HAVE_CUDA
#include "core/cuda/channel_sums.h"
#include "core/cuda/context.h"
#endif

namespace poseidon {
namespace {

struct SumsShape {
  size_t outer, channels, inner;
};

// Strided with one and several chunks, a last chunk shorter than the rest,
// inner below the block's threads, sequential (inner 1) with one and several
// chunks, and empty channels.
const std::vector<SumsShape> kShapes = {{3, 5, 7},   {2, 3, 5000},  {4, 2, 4097}, {32, 4, 49}, {5, 3, 257},
                                        {32, 9, 1},  {1000, 4, 1},  {70, 300, 1}, {0, 3, 5},   {4, 2, 0},
                                        {1, 2, 512}, {2, 1, 70000}, {1, 70000, 2}};

std::vector<float> values_for(const SumsShape& s, std::mt19937_64& rng, bool exact) {
  std::vector<float> x(s.outer * s.channels * s.inner);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = exact ? static_cast<float>(static_cast<int>(rng() % 13) - 6) * 0.25f : uni(rng);
  return x;
}

// The independent computation: every value of channel c in flat order.
template <class Accumulator>
Accumulator plain_sum(const std::vector<float>& x, const SumsShape& s, size_t c, bool absolute = false) {
  Accumulator sum = 0;
  for (size_t i = 0; i < s.outer; ++i)
    for (size_t j = 0; j < s.inner; ++j) {
      const float v = x[(i * s.channels + c) * s.inner + j];
      sum += absolute ? std::abs(v) : v;
    }
  return sum;
}

TEST(ChannelSums, PlanCoversEveryValueOnce) {
  for (const SumsShape& s : kShapes) {
    const ChannelSumsPlan p = plan_channel_sums(s.outer, s.channels, s.inner);
    EXPECT_EQ(p.strided, s.inner > 1);
    EXPECT_LE(p.chunks, ChannelSumsPlan::kMaxChunks);
    if (p.per_channel() == 0) {
      EXPECT_EQ(p.chunks, 0u);
      continue;
    }
    if (p.strided) EXPECT_EQ(p.chunk % ChannelSumsPlan::kThreads, 0u) << "inner " << s.inner;
    size_t next = 0;
    for (size_t k = 0; k < p.chunks; ++k) {
      EXPECT_EQ(p.begin(k), next);
      EXPECT_LT(p.begin(k), p.end(k)) << "chunk " << k << " of " << p.chunks << " is empty";
      next = p.end(k);
    }
    EXPECT_EQ(next, p.per_channel());
  }
  // VGG19's first layer at batch 32 (1.6M values a channel): many blocks per
  // channel; an fc batch of 32 rows: one chunk, rows in order as the CPU adds.
  EXPECT_EQ(plan_channel_sums(32, 64, 224 * 224).chunks, ChannelSumsPlan::kMaxChunks);
  EXPECT_EQ(plan_channel_sums(32, 4096, 1).chunks, 1u);
}

TEST(ChannelSums, ReferenceEqualsAPlainLoopOnExactlyAddingValues) {
  std::mt19937_64 rng(3);
  for (const SumsShape& s : kShapes) {
    // Quarters up to 1.5 in magnitude: every partial sum is a float32 exactly.
    const std::vector<float> x = values_for(s, rng, true);
    std::vector<uint16_t> halves(x.size());
    for (size_t i = 0; i < x.size(); ++i) halves[i] = to_bf16(x[i]);
    const ChannelSumsPlan p = plan_channel_sums(s.outer, s.channels, s.inner);
    std::vector<float> sums(s.channels, -1.f), from_halves(s.channels, -1.f);
    channel_sums_reference(sums.data(), x.data(), p);
    channel_sums_reference(from_halves.data(), halves.data(), p);
    for (size_t c = 0; c < s.channels; ++c) {
      const float want = plain_sum<float>(x, s, c);
      ASSERT_EQ(sums[c], want) << "shape " << s.outer << "x" << s.channels << "x" << s.inner << " channel " << c;
      ASSERT_EQ(from_halves[c], want) << "bfloat16, channel " << c;
    }
  }
}

TEST(ChannelSums, ReferenceIsWithinFloat32RoundingOfTheExactSum) {
  std::mt19937_64 rng(4);
  for (const SumsShape& s : kShapes) {
    const std::vector<float> x = values_for(s, rng, false);
    const ChannelSumsPlan p = plan_channel_sums(s.outer, s.channels, s.inner);
    std::vector<float> sums(s.channels);
    channel_sums_reference(sums.data(), x.data(), p);
    // Each value passes through at most its chunk's additions (a thread's
    // share, the tree's 8 levels) and the chunks' additions.
    const double adds = double(p.chunk) / (p.strided ? ChannelSumsPlan::kThreads : 1) + 8 + p.chunks;
    for (size_t c = 0; c < s.channels; ++c) {
      const double bound = adds * std::numeric_limits<float>::epsilon() * plain_sum<double>(x, s, c, true);
      ASSERT_LE(std::abs(sums[c] - plain_sum<double>(x, s, c)), bound) << "channel " << c;
    }
  }
}

// One strided chunk of 512 values: 2^24, 255 ones, 256 zeros. A plain loop,
// and threads' shares added one after another, lose every one (2^24 + 1
// rounds back to 2^24). In the plan's order thread t's share is x[t] (plus
// a zero), and the tree loses only share 128's one, which meets 2^24 alone
// at the first level; the other 254 reach it in pairs, fours, ... which
// 2^24 + an even number holds exactly: 2^24 + 254.
TEST(ChannelSums, ReferenceAddsInThePlansOrder) {
  const SumsShape s{1, 1, 512};
  std::vector<float> x(512, 0.f);
  std::fill(x.begin(), x.begin() + 256, 1.f);
  x[0] = 16777216.f;
  float sum = 0.f;
  channel_sums_reference(&sum, x.data(), plan_channel_sums(s.outer, s.channels, s.inner));
  EXPECT_EQ(plain_sum<float>(x, s, 0), 16777216.f);
  EXPECT_EQ(sum, 16777216.f + 254.f);
}

#ifdef POSEIDON_HAVE_CUDA

using poseidon::testing::on_gpu;

// Sums that start away from zero: every one must be written.
Tensor sums_on_gpu(size_t channels) {
  Tensor sums({static_cast<int64_t>(channels)}, Device::cuda(0));
  sums.fill(7.f);
  return sums;
}

TEST(CudaChannelSums, EqualTheCpuReferenceBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  cuda::Context& gpu = cuda::Context::get(0);
  std::mt19937_64 rng(5);
  for (const SumsShape& s : kShapes) {
    const std::vector<float> x = values_for(s, rng, false);
    std::vector<uint16_t> halves(x.size());
    for (size_t i = 0; i < x.size(); ++i) halves[i] = to_bf16(x[i]);
    const ChannelSumsPlan p = plan_channel_sums(s.outer, s.channels, s.inner);
    std::vector<float> want(s.channels), want_halves(s.channels);
    channel_sums_reference(want.data(), x.data(), p);
    channel_sums_reference(want_halves.data(), halves.data(), p);

    const Tensor device_x = on_gpu(x), device_halves = on_gpu(halves);
    Tensor sums = sums_on_gpu(s.channels), sums_halves = sums_on_gpu(s.channels);
    cuda::channel_sums(gpu, sums.data(), device_x.data(), s.outer, s.channels, s.inner);
    cuda::channel_sums(gpu, sums_halves.data(), device_halves.bf16_data(), s.outer, s.channels, s.inner);
    const Tensor got = sums.to(Device{}), got_halves = sums_halves.to(Device{});
    for (size_t c = 0; c < s.channels; ++c) {
      ASSERT_EQ(float_bits(got[c]), float_bits(want[c]))
          << "shape " << s.outer << "x" << s.channels << "x" << s.inner << " channel " << c << ": gpu " << got[c]
          << " cpu " << want[c];
      ASSERT_EQ(float_bits(got_halves[c]), float_bits(want_halves[c])) << "bfloat16, channel " << c;
    }
  }
}

#endif  // POSEIDON_HAVE_CUDA

}  // namespace
}  // namespace poseidon
