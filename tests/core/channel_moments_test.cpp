// The channel moments (core/channel_moments.h): the plan cuts every channel
// into chunks that cover its values once; Chan's merge of pieces of unequal
// sizes gives the moments of the whole; and the CPU reference equals a
// two-pass computation in long double (the mean, then the squared
// deviations from it) to a bound that the sum of squares less the squared
// sum misses by orders of magnitude on values whose mean is large next to
// their spread (1e4 + N(0, 0.01^2)), over shapes of one and many chunks and
// threads of unequal counts. On a GPU the kernels
// (core/cuda/channel_moments.cu) equal the reference bit for bit on shapes
// that take every path: one chunk, many, more than the merge's lanes, the
// most chunks, more channels than a grid's y dimension, and empty channels.
#include "core/channel_moments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"
#include "gpu_required.h"
#include "gpu_tensors.h"
#ifdef POSEIDON_HAVE_CUDA
#include "core/cuda/channel_moments.h"
#include "core/cuda/context.h"
#endif

namespace poseidon {
namespace {

struct MomentsShape {
  size_t outer, channels, inner;
};

// One chunk with threads of unequal counts, a chunk of one value per thread
// and fewer, many chunks with a shorter last one (strided and inner 1), more
// chunks than the merge's lanes, and empty channels.
const std::vector<MomentsShape> kShapes = {{3, 5, 7},     {2, 3, 5000}, {4, 2, 4097}, {32, 4, 49}, {5000, 3, 1},
                                           {2, 2, 70001}, {1, 2, 300},  {0, 3, 5},    {4, 2, 0}};

// Values 1e4 + N(0, 0.01^2) (large mean, small spread), or N(0, 1).
std::vector<float> values_for(const MomentsShape& s, std::mt19937_64& rng, bool large_mean) {
  std::vector<float> x(s.outer * s.channels * s.inner);
  std::normal_distribution<double> normal(0.0, large_mean ? 0.01 : 1.0);
  for (float& v : x) v = static_cast<float>((large_mean ? 1e4 : 0.0) + normal(rng));
  return x;
}

std::vector<float> channel_values(const std::vector<float>& x, const MomentsShape& s, size_t c) {
  std::vector<float> v;
  for (size_t i = 0; i < s.outer; ++i)
    for (size_t j = 0; j < s.inner; ++j) v.push_back(x[(i * s.channels + c) * s.inner + j]);
  return v;
}

// The independent computation: the mean, then the squared deviations from it.
struct Exact {
  long double mean = 0, m2 = 0;
  long double magnitude = 0;  // the mean of the values' magnitudes
};

Exact two_pass(const float* v, size_t n) {
  Exact e;
  for (size_t i = 0; i < n; ++i) {
    e.mean += v[i];
    e.magnitude += std::abs(v[i]);
  }
  e.mean /= n;
  e.magnitude /= n;
  for (size_t i = 0; i < n; ++i) e.m2 += (v[i] - e.mean) * (v[i] - e.mean);
  return e;
}

// The bounds the moments keep: the mean to 1e-14 of the values' magnitude
// (a few of double's roundings), M2 to 1e-9 of itself. Every piece's mean
// is off by some 1e-16 of 1e4, which the merges carry into M2 times the
// means' differences (some 0.01 / sqrt(piece)): up to some 1e-10 of M2 on
// the large-mean values where the pieces are single values, 1e-13 where
// they are groups. A sum of squares less the squared sum cancels 1e8
// against 1e8 for a difference of 1e-4: it keeps some 1e-4 of M2 at best.
constexpr double kMeanTolerance = 1e-14;
constexpr double kM2Tolerance = 1e-9;

void expect_close(const Moments& got, const Exact& want, size_t n, const std::string& what) {
  EXPECT_EQ(got.count, static_cast<double>(n)) << what;
  EXPECT_LE(std::abs(got.mean - want.mean), kMeanTolerance * want.magnitude) << what;
  EXPECT_LE(std::abs(got.m2 - want.m2), kM2Tolerance * want.m2)
      << what << ": m2 " << got.m2 << " want " << static_cast<double>(want.m2);
}

TEST(ChannelMoments, PlanCoversEveryValueOnce) {
  for (const MomentsShape& s : kShapes) {
    const ChannelMomentsPlan p = plan_channel_moments(s.outer, s.channels, s.inner);
    EXPECT_LE(p.chunks, ChannelMomentsPlan::kMaxChunks);
    if (p.per_channel() == 0) {
      EXPECT_EQ(p.chunks, 0u);
      continue;
    }
    EXPECT_EQ(p.chunk % ChannelMomentsPlan::kThreads, 0u);
    size_t next = 0;
    for (size_t k = 0; k < p.chunks; ++k) {
      EXPECT_EQ(p.begin(k), next);
      EXPECT_LT(p.begin(k), p.end(k)) << "chunk " << k << " of " << p.chunks << " is empty";
      next = p.end(k);
    }
    EXPECT_EQ(next, p.per_channel());
  }
  // More chunks than the merge's lanes; VGG19's first layer at batch 32
  // (1.6M values a channel) in chunks of one group a thread; at batch 128
  // the chunks reach their most and grow to several groups a thread.
  EXPECT_GT(plan_channel_moments(2, 2, 70001).chunks, ChannelMomentsPlan::kLanes);
  EXPECT_EQ(plan_channel_moments(32, 64, 224 * 224).chunk, ChannelMomentsPlan::kThreads * ChannelMomentsPlan::kGroup);
  EXPECT_GT(plan_channel_moments(128, 64, 224 * 224).chunk, ChannelMomentsPlan::kThreads * ChannelMomentsPlan::kGroup);
  EXPECT_EQ(plan_channel_moments(2, 2, 3 * 1024 * 1024).chunks, ChannelMomentsPlan::kMaxChunks);
}

// Pieces of 0 to 700 values (empty and single ones among them), merged in
// turn, give the moments of all of them.
TEST(ChannelMoments, MergingPiecesOfUnequalSizesGivesTheWholesMoments) {
  std::mt19937_64 rng(7);
  const MomentsShape s{1, 1, 100000};
  const std::vector<float> x = values_for(s, rng, true);
  Moments merged = {0, 0, 0};
  size_t at = 0, pieces = 0;
  while (at < x.size()) {
    // Every tenth piece empty, every tenth a single value.
    const size_t drawn = pieces % 10 == 3 ? 0 : (pieces % 10 == 7 ? 1 : rng() % 701);
    const size_t size = std::min(drawn, x.size() - at);
    Moments piece = {0, 0, 0};
    if (size) {
      const Exact e = two_pass(x.data() + at, size);
      piece = {static_cast<double>(size), static_cast<double>(e.mean), static_cast<double>(e.m2)};
    }
    merged = merge_moments(merged, piece);
    at += size;
    ++pieces;
  }
  ASSERT_GT(pieces, 200u);
  expect_close(merged, two_pass(x.data(), x.size()), x.size(), "merged pieces");
}

TEST(ChannelMoments, ReferenceEqualsTwoPassWhereTheMeanDwarfsTheSpread) {
  std::mt19937_64 rng(8);
  for (bool large_mean : {true, false})
    for (const MomentsShape& s : kShapes) {
      const std::vector<float> x = values_for(s, rng, large_mean);
      const ChannelMomentsPlan p = plan_channel_moments(s.outer, s.channels, s.inner);
      std::vector<Moments> got(s.channels, Moments{-1, -1, -1});
      channel_moments_reference(got.data(), x.data(), p);
      for (size_t c = 0; c < s.channels; ++c) {
        const std::string what = "shape " + std::to_string(s.outer) + "x" + std::to_string(s.channels) + "x" +
                                 std::to_string(s.inner) + " channel " + std::to_string(c) +
                                 (large_mean ? " (mean 1e4)" : " (mean 0)");
        const std::vector<float> v = channel_values(x, s, c);
        if (v.empty()) {
          EXPECT_EQ(got[c].count, 0.0) << what;
          EXPECT_EQ(got[c].mean, 0.0) << what;
          EXPECT_EQ(got[c].m2, 0.0) << what;
          continue;
        }
        expect_close(got[c], two_pass(v.data(), v.size()), v.size(), what);
      }
    }
}

// The bound tells a stable computation from an unstable one: the sum of
// squares less the squared sum, in double, misses it on the values above.
TEST(ChannelMoments, TheBoundRejectsTheSumOfSquaresLessTheSquaredSum) {
  std::mt19937_64 rng(9);
  const MomentsShape s{2, 1, 5000};
  const std::vector<float> x = values_for(s, rng, true);
  double sum = 0, squares = 0;
  for (float v : x) {
    sum += v;
    squares += double(v) * v;
  }
  const double n = static_cast<double>(x.size());
  const Exact want = two_pass(x.data(), x.size());
  const double naive_m2 = squares - sum * sum / n;
  EXPECT_GT(std::abs(naive_m2 - want.m2), 100 * kM2Tolerance * want.m2)
      << "naive m2 " << naive_m2 << " want " << static_cast<double>(want.m2);
}

#ifdef POSEIDON_HAVE_CUDA

// The moments of `channels` channels as a device tensor of raw doubles,
// filled with other bits first: every one must be written.
Tensor moments_on_gpu(size_t channels) {
  Tensor moments({static_cast<int64_t>(channels * sizeof(Moments) / sizeof(float))}, Device::cuda(0));
  moments.fill(7.f);
  return moments;
}

TEST(CudaChannelMoments, OnePassStatisticsEqualTheReferenceBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  cuda::Context& gpu = cuda::Context::get(0);
  std::mt19937_64 rng(10);
  std::vector<MomentsShape> shapes = kShapes;
  shapes.push_back({1, 70000, 2});            // more channels than a grid's rows
  shapes.push_back({2, 2, 3 * 1024 * 1024});  // the most chunks, of two groups a thread
  for (bool large_mean : {true, false})
    for (const MomentsShape& s : shapes) {
      const std::vector<float> x = values_for(s, rng, large_mean);
      const ChannelMomentsPlan p = plan_channel_moments(s.outer, s.channels, s.inner);
      std::vector<Moments> want(s.channels);
      channel_moments_reference(want.data(), x.data(), p);
      const Tensor device_x = testing::on_gpu(x);
      Tensor moments = moments_on_gpu(s.channels);
      for (int run = 0; run < 2; ++run) {
        cuda::channel_moments(gpu, reinterpret_cast<Moments*>(moments.data()), device_x.data(), s.outer, s.channels,
                              s.inner);
        const Tensor got = moments.to(Device{});
        const auto* got_moments = reinterpret_cast<const Moments*>(got.data());
        for (size_t c = 0; c < s.channels; ++c)
          ASSERT_EQ(std::memcmp(&got_moments[c], &want[c], sizeof(Moments)), 0)
              << "shape " << s.outer << "x" << s.channels << "x" << s.inner << " channel " << c << " run " << run
              << ": gpu (" << got_moments[c].count << ", " << got_moments[c].mean << ", " << got_moments[c].m2
              << ") cpu (" << want[c].count << ", " << want[c].mean << ", " << want[c].m2 << ")";
      }
    }
}

#endif  // POSEIDON_HAVE_CUDA

}  // namespace
}  // namespace poseidon
