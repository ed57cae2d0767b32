// Tensors of bfloat16 elements: half the bytes of float32, accessors that
// refuse the other type, and casts that round to nearest even and widen
// exactly, on the CPU and (where one is usable) on a GPU bit for bit alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "gpu_required.h"

namespace poseidon {
namespace {

// Values next to their bfloat16 bits, written out by hand (not through
// core/bf16.h): exact ones, the two ties (to even: down from 1 + 2^-8, up
// from 1 + 3 * 2^-8), a value just above a tie, and the specials.
struct Case {
  float value;
  uint16_t bits;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {1.0f, 0x3F80},
      {-2.5f, 0xC020},
      {1.0f + 0x1p-8f, 0x3F80},
      {1.0f + 3 * 0x1p-8f, 0x3F82},
      {1.0f + 0x1p-8f + 0x1p-20f, 0x3F81},
      {0.1f, 0x3DCD},
      {std::numeric_limits<float>::infinity(), 0x7F80},
      {-0.0f, 0x8000},
  };
  return c;
}

Tensor case_values(Device device = {}) {
  Tensor host({static_cast<int64_t>(cases().size())});
  for (size_t i = 0; i < cases().size(); ++i) host[i] = cases()[i].value;
  return host.to(device);
}

TEST(TensorDtype, Bf16TensorHoldsHalfTheBytesAndViewsCountElements) {
  Tensor f({2, 3, 4});
  Tensor h({2, 3, 4}, {}, DType::bf16);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(f.bytes(), 24 * sizeof(float));
  EXPECT_EQ(h.bytes(), 24 * sizeof(uint16_t));
  auto storage = std::make_shared<Storage>(16, Device{}, DType::bf16);
  Tensor whole(storage, 0, {16});
  Tensor view(storage, 5, {4});
  EXPECT_EQ(view.dtype(), DType::bf16);
  EXPECT_EQ(view.bf16_data() - whole.bf16_data(), 5);
  EXPECT_EQ(view.reshaped({2, 2}).bf16_data(), view.bf16_data());
}

TEST(TensorDtype, EachAccessorRefusesTheOtherType) {
  Tensor f({4});
  Tensor h({4}, {}, DType::bf16);
  try {
    (void)h.data();
    FAIL() << "data() read a bf16 tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a bf16 tensor [4] read as f32"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)f.bf16_data(), Error);
  const Tensor& const_h = h;
  EXPECT_THROW((void)const_h[0], Error);
}

TEST(TensorDtype, CastRoundsToNearestEvenAndWidensExactly) {
  Tensor rounded = case_values().to(DType::bf16);
  ASSERT_EQ(rounded.dtype(), DType::bf16);
  Tensor widened = rounded.to(DType::f32);
  for (size_t i = 0; i < cases().size(); ++i) {
    EXPECT_EQ(rounded.bf16_data()[i], cases()[i].bits) << "value " << cases()[i].value;
    uint32_t bits = 0;
    std::memcpy(&bits, &widened[i], sizeof bits);
    EXPECT_EQ(bits, uint32_t{cases()[i].bits} << 16) << "value " << cases()[i].value;
    EXPECT_EQ(rounded.item(i), widened[i]);
  }
  Tensor nan({1});
  nan[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(nan.to(DType::bf16).item(0)));
}

TEST(TensorDtype, Bf16ValuesSurviveARoundTrip) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 30.f);
  Tensor x({1000});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = normal(rng);
  Tensor once = x.to(DType::bf16);
  Tensor twice = once.to(DType::f32).to(DType::bf16);
  EXPECT_EQ(std::memcmp(once.bf16_data(), twice.bf16_data(), once.bytes()), 0);
  int changed = 0;
  for (int64_t i = 0; i < x.numel(); ++i) changed += once.item(i) != x[i];
  EXPECT_GT(changed, 900);  // the cast did round
}

TEST(TensorDtype, ResizeKeepsTheTypeAndSetDtypeDropsTheStorage) {
  Tensor t = Tensor::on(Device{}, DType::bf16);
  t.resize({3, 5});
  EXPECT_EQ(t.dtype(), DType::bf16);
  EXPECT_EQ(t.bytes(), 15 * sizeof(uint16_t));
  t.fill(1.0f + 0x1p-8f);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.bf16_data()[i], 0x3F80);
  t.set_dtype(DType::f32);
  EXPECT_FALSE(t.defined());
  t.resize({3, 5});
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.bytes(), 15 * sizeof(float));
}

TEST(TensorDtype, CopyKeepsTheBitsWithinATypeAndCastsBetweenTypes) {
  Tensor h = case_values().to(DType::bf16);
  Tensor same({static_cast<int64_t>(cases().size())}, {}, DType::bf16);
  same.copy_from(h);
  EXPECT_EQ(std::memcmp(same.bf16_data(), h.bf16_data(), h.bytes()), 0);
  Tensor into_bf16({static_cast<int64_t>(cases().size())}, {}, DType::bf16);
  into_bf16.copy_from(case_values());
  EXPECT_EQ(std::memcmp(into_bf16.bf16_data(), h.bf16_data(), h.bytes()), 0);
}

TEST(CudaTensorDtype, CastsAndFillMatchTheCpuBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  Tensor cpu = case_values().to(DType::bf16);
  Tensor on_gpu = case_values(gpu).to(DType::bf16);
  ASSERT_TRUE(on_gpu.is_cuda());
  Tensor back = on_gpu.to(Device{});
  EXPECT_EQ(std::memcmp(back.bf16_data(), cpu.bf16_data(), cpu.bytes()), 0);
  Tensor widened = on_gpu.to(DType::f32).to(Device{});
  Tensor cpu_widened = cpu.to(DType::f32);
  EXPECT_EQ(std::memcmp(widened.data(), cpu_widened.data(), cpu_widened.bytes()), 0);
  Tensor filled({7}, gpu, DType::bf16);
  filled.fill(0.1f);
  for (int64_t i = 0; i < filled.numel(); ++i) EXPECT_EQ(filled.item(i), cpu.item(5));
}

}  // namespace
}  // namespace poseidon
