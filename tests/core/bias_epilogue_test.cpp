// The bias epilogue (core/bias_epilogue.h): the CPU reference adds each
// channel's bias and clamps at zero as a flat loop that finds every value's
// channel by division does, leaves a product without bias as it is (-0
// included), clamps NaN to zero as the CPU's ReLU does, and the fused ReLU's
// mask passes the gradient only where the output is positive. On a GPU the
// kernels (core/cuda/bias_epilogue.cu) equal the reference bit for bit, from
// float32 in place and from bfloat16, with and without bias and ReLU, on
// shapes of one value per plane, planes narrower than a warp's multiple and
// wider than a grid row, and more planes than a grid's y dimension; into a
// bfloat16 output (a bf16 conv's or fc's blob) they write the reference's
// float32 value rounded once, and the mask on a bfloat16 gradient is the
// reference's.
#include "core/bias_epilogue.h"

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
#include "core/cuda/bias_epilogue.h"
#include "core/cuda/context.h"
#endif

namespace poseidon {
namespace {

struct PlaneShape {
  size_t outer, channels, inner;
};

const std::vector<PlaneShape> kShapes = {{3, 4, 1},     {2, 5, 49},    {2, 3, 1000}, {1, 2, 70000},
                                         {70000, 1, 3}, {70000, 3, 1}, {0, 3, 4}};

std::vector<float> random_values(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = uni(rng);
  return v;
}

TEST(BiasEpilogue, ReferenceAddsEachChannelsBiasAndClamps) {
  std::mt19937_64 rng(6);
  for (const PlaneShape& s : kShapes) {
    const size_t n = s.outer * s.channels * s.inner;
    const std::vector<float> y = random_values(n, rng), bias = random_values(s.channels, rng);
    for (bool relu : {false, true}) {
      std::vector<float> out(n, 9.f);
      bias_epilogue_reference(out.data(), y.data(), bias.data(), s.outer, s.channels, s.inner, relu);
      for (size_t i = 0; i < n; ++i) {
        const float v = y[i] + bias[(i / s.inner) % s.channels];
        ASSERT_EQ(out[i], relu ? std::max(v, 0.f) : v) << "value " << i << " relu " << relu;
      }
    }
  }
}

TEST(BiasEpilogue, ReferenceWithoutBiasKeepsTheProductAndClampsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> y = {-0.f, 2.f, -3.f, nan};
  std::vector<float> out(4), clamped(4);
  bias_epilogue_reference(out.data(), y.data(), nullptr, 1, 2, 2, false);
  bias_epilogue_reference(clamped.data(), y.data(), nullptr, 1, 2, 2, true);
  EXPECT_TRUE(std::signbit(out[0]));
  EXPECT_EQ(out[1], 2.f);
  EXPECT_EQ(out[2], -3.f);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(clamped, (std::vector<float>{0.f, 2.f, 0.f, 0.f}));
  // From bfloat16: the widened values, exactly.
  const std::vector<uint16_t> halves = {to_bf16(1.5f), to_bf16(-0.25f)};
  const float bias[] = {0.5f};
  std::vector<float> widened(2);
  bias_epilogue_reference(widened.data(), halves.data(), bias, 1, 1, 2, true);
  EXPECT_EQ(widened, (std::vector<float>{2.f, 0.25f}));
}

TEST(BiasEpilogue, ReluMaskPassesTheGradientWhereTheOutputIsPositive) {
  const std::vector<float> y = {1.f, 0.f, -0.f, -2.f, 3.f};
  std::vector<float> dy = {5.f, 6.f, 7.f, 8.f, -9.f};
  relu_mask_reference(y.data(), dy.data(), y.size());
  EXPECT_EQ(dy, (std::vector<float>{5.f, 0.f, 0.f, 0.f, -9.f}));
}

#ifdef POSEIDON_HAVE_CUDA

using poseidon::testing::on_gpu;

void expect_same_bits(const Tensor& gpu, const std::vector<float>& want, const std::string& what) {
  const Tensor got = gpu.to(Device{});
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(float_bits(got[i]), float_bits(want[i]))
        << what << " value " << i << ": gpu " << got[i] << " cpu " << want[i];
}

TEST(CudaBiasEpilogue, EqualsTheCpuReferenceBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  cudaStream_t stream = cuda::Context::get(0).compute();
  std::mt19937_64 rng(7);
  for (const PlaneShape& s : kShapes) {
    const size_t n = s.outer * s.channels * s.inner;
    const std::vector<float> y = random_values(n, rng), bias = random_values(s.channels, rng);
    std::vector<uint16_t> halves(n);
    for (size_t i = 0; i < n; ++i) halves[i] = to_bf16(y[i]);
    const Tensor device_bias = on_gpu(bias), device_halves = on_gpu(halves);
    for (bool with_bias : {false, true})
      for (bool relu : {false, true}) {
        const float* b = with_bias ? bias.data() : nullptr;
        const float* device_b = with_bias ? device_bias.data() : nullptr;
        const std::string what = std::to_string(s.outer) + "x" + std::to_string(s.channels) + "x" +
                                 std::to_string(s.inner) + (with_bias ? " bias" : "") + (relu ? " relu" : "");
        std::vector<float> want(n), want_halves(n);
        bias_epilogue_reference(want.data(), y.data(), b, s.outer, s.channels, s.inner, relu);
        bias_epilogue_reference(want_halves.data(), halves.data(), b, s.outer, s.channels, s.inner, relu);
        Tensor in_place = on_gpu(y), widened = on_gpu(std::vector<float>(n, 9.f));
        cuda::bias_epilogue(in_place.data(), in_place.data(), device_b, s.outer, s.channels, s.inner, relu, stream);
        cuda::bias_epilogue(widened.data(), device_halves.bf16_data(), device_b, s.outer, s.channels, s.inner, relu,
                            stream);
        expect_same_bits(in_place, want, what + " in place");
        expect_same_bits(widened, want_halves, what + " from bfloat16");
      }
    std::vector<float> dy = random_values(n, rng);
    Tensor device_dy = on_gpu(dy);
    const Tensor device_y = on_gpu(y);
    relu_mask_reference(y.data(), dy.data(), n);
    cuda::relu_mask(device_y.data(), device_dy.data(), n, stream);
    expect_same_bits(device_dy, dy, "relu mask");
  }
}

std::vector<uint16_t> rounded(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_bf16(v[i]);
  return out;
}

void expect_same_halves(const Tensor& gpu, const std::vector<uint16_t>& want, const std::string& what) {
  const Tensor got = gpu.to(Device{});
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got.bf16_data()[i], want[i]) << what << " value " << i;
}

TEST(CudaBiasEpilogue, WritesBfloat16AsTheReferenceRoundedOnce) {
  POSEIDON_SKIP_WITHOUT_GPU();
  cudaStream_t stream = cuda::Context::get(0).compute();
  std::mt19937_64 rng(8);
  for (const PlaneShape& s : kShapes) {
    const size_t n = s.outer * s.channels * s.inner;
    const std::vector<float> y = random_values(n, rng), bias = random_values(s.channels, rng);
    const std::vector<uint16_t> halves = rounded(y);
    const Tensor device_bias = on_gpu(bias), device_y = on_gpu(y);
    for (bool with_bias : {false, true})
      for (bool relu : {false, true}) {
        const float* b = with_bias ? bias.data() : nullptr;
        const float* device_b = with_bias ? device_bias.data() : nullptr;
        const std::string what = std::to_string(s.outer) + "x" + std::to_string(s.channels) + "x" +
                                 std::to_string(s.inner) + (with_bias ? " bias" : "") + (relu ? " relu" : "");
        std::vector<float> want(n), want_halves(n);
        bias_epilogue_reference(want.data(), y.data(), b, s.outer, s.channels, s.inner, relu);
        bias_epilogue_reference(want_halves.data(), halves.data(), b, s.outer, s.channels, s.inner, relu);
        Tensor from_float = on_gpu(std::vector<uint16_t>(n, 0x7fc0)), in_place = on_gpu(halves);
        cuda::bias_epilogue(from_float.bf16_data(), device_y.data(), device_b, s.outer, s.channels, s.inner, relu,
                            stream);
        cuda::bias_epilogue(in_place.bf16_data(), in_place.bf16_data(), device_b, s.outer, s.channels, s.inner, relu,
                            stream);
        expect_same_halves(from_float, rounded(want), what + " from float32");
        expect_same_halves(in_place, rounded(want_halves), what + " in place");
      }
    std::vector<float> dy = random_values(n, rng);
    Tensor device_dy = on_gpu(rounded(dy));
    const Tensor device_halves = on_gpu(halves);
    std::vector<float> y_widened(n), dy_widened(n);
    for (size_t i = 0; i < n; ++i) y_widened[i] = from_bf16(halves[i]), dy_widened[i] = from_bf16(to_bf16(dy[i]));
    relu_mask_reference(y_widened.data(), dy_widened.data(), n);
    cuda::relu_mask(device_halves.bf16_data(), device_dy.bf16_data(), n, stream);
    expect_same_halves(device_dy, rounded(dy_widened), "bfloat16 relu mask");
  }
}

#endif  // POSEIDON_HAVE_CUDA

}  // namespace
}  // namespace poseidon
