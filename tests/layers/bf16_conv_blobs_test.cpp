// The conv layer under bf16 on oneDNN's bfloat16 direct kernels reads and
// writes bfloat16 blobs as they are (layers/conv_dnnl.h). On blobs of either
// type the primitives compute the same bfloat16 results; on float32 blobs
// the layer widens them into the blobs. So on bfloat16 blobs of the same
// (bfloat16-exact) values its output and input gradient must be the float32
// run's rounded, bit for bit (an added input gradient: the float32 sum of
// the old one and the new, rounded once), and its parameter gradients the
// float32 run's, bit for bit: over 16-channel blocks, channel counts that
// take oneDNN's reorders instead of the layer's transposes, groups, strides,
// a fused ReLU, no bias, and a first layer's float32 input. And it holds no
// float32 copy of a blob, where the matrix products of small images do.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/registry.h"
#include "core/relu_fusion.h"
#include "layers/conv.h"
#include "layers/dnnl_support.h"

#ifdef POSEIDON_HAVE_DNNL
#include "layers/conv_matmul.h"
#endif

namespace poseidon::testing {
namespace {

#ifdef POSEIDON_HAVE_DNNL

struct Case {
  std::string label, keys;  // the conv's keys besides name and type
  Shape x;
  bool relu = false;
  DType x_type = DType::bf16;  // a first layer reads float32
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// Random values that bfloat16 holds exactly; one in 97 a subnormal one
// (of either sign), which oneDNN's float32-to-bfloat16 reorders flush to
// zero and its bfloat16 dot products read as zero.
Tensor bf16_exact(const Shape& shape, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t[i] =
        i % 97 == 5 ? from_bf16(static_cast<uint16_t>((i & 1) << 15 | (1 + i % 127))) : from_bf16(to_bf16(normal(rng)));
  return t;
}

Tensor copy_as(const Tensor& t, DType type) {
  Tensor c(t.shape(), Device{}, type);
  c.copy_from(t);
  return c;
}

struct ConvRun {
  std::unique_ptr<Layer> layer;
  Tensor y, dx;
};

// Forward and backward of the case's conv in precision bf16 on x, dy and
// an input gradient that holds dx_in (added onto, or with `overwrite`
// written over; none with `no_dx`), the blobs of x and dx of type
// `x_type`, those of y and dy of type `y_type`.
ConvRun run_conv(const Case& c, const Tensor& x, const Tensor& dy, const Tensor& dx_in, DType x_type, DType y_type,
                 bool overwrite, bool no_dx) {
  ConvRun r;
  r.layer = LayerRegistry::instance().create(ConfigNode::parse("{name: c, type: conv, " + c.keys + "}", c.label));
  r.layer->set_precision(Precision::bf16);
  const Shape out = r.layer->reshape({c.x}).at(0);
  if (c.relu) dynamic_cast<ReluFusable&>(*r.layer).fuse_relu();
  std::mt19937_64 rng(3);
  for (Param& p : r.layer->params()) {
    p.value = bf16_exact(p.shape, rng);
    p.grad = Tensor(p.shape);
  }
  Tensor xt = copy_as(x, x_type), dyt = copy_as(dy.reshaped(out), y_type);
  r.y = Tensor(out, Device{}, y_type);
  r.dx = copy_as(dx_in, x_type);
  LayerIO io{{&xt}, {&r.y}, {&dyt}, {no_dx ? nullptr : &r.dx}};
  io.in_grad_unset = {overwrite};
  RunContext ctx;
  r.layer->forward(io, ctx);
  r.layer->backward(io, ctx);
  return r;
}

// `got` (bfloat16) holds `want` (float32) rounded, element for element.
void expect_rounded(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::bf16) << what;
  ASSERT_EQ(got.numel(), want.numel()) << what;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (got.bf16_data()[i] != to_bf16(want[i]) && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << want.numel() << " differ, first at " << first;
}

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.bytes()), 0) << what;
}

class Bf16ConvBlobs : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!dnnl_runs_bf16_kernels()) GTEST_SKIP() << "oneDNN runs no bfloat16 kernels here";
  }
};

TEST_P(Bf16ConvBlobs, AreTheFloat32BlobsResultsRoundedBitwiseWithoutFloat32Copies) {
  const Case& c = GetParam();
  std::mt19937_64 rng(11);
  const Tensor x = bf16_exact(c.x, rng), dx_in = bf16_exact(c.x, rng);
  auto probe = LayerRegistry::instance().create(ConfigNode::parse("{name: c, type: conv, " + c.keys + "}", c.label));
  const Tensor dy = bf16_exact({shape_numel(probe->reshape({c.x}).at(0))}, rng);
  for (const bool overwrite : {false, true}) {
    for (const bool no_dx : {false, true}) {
      if (no_dx && overwrite) continue;
      SCOPED_TRACE(no_dx ? "no input gradient" : overwrite ? "input gradient written" : "input gradient added");
      const ConvRun f32 = run_conv(c, x, dy, dx_in, DType::f32, DType::f32, overwrite, no_dx);
      const ConvRun bf16 = run_conv(c, x, dy, dx_in, c.x_type, DType::bf16, overwrite, no_dx);
      ASSERT_EQ(bf16.layer->engine(), "onednn");
      EXPECT_EQ(dynamic_cast<const ConvLayer&>(*bf16.layer).widened_bytes(), 0) << "a blob was widened";
      expect_rounded(bf16.y, f32.y, "output");
      if (c.x_type == DType::bf16 && !no_dx) expect_rounded(bf16.dx, f32.dx, "input gradient");
      if (c.x_type == DType::f32 && !no_dx) expect_same_bits(bf16.dx, f32.dx, "float32 input gradient");
      for (size_t k = 0; k < f32.layer->params().size(); ++k)
        expect_same_bits(bf16.layer->param(k).grad, f32.layer->param(k).grad, f32.layer->param(k).name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bf16ConvShapes, Bf16ConvBlobs,
    ::testing::Values(
        Case{"blocks16_relu", "num_output: 32, kernel_size: 3, pad: 1", {2, 16, 10, 10}, true},
        Case{"strided_no_bias", "num_output: 16, kernel_size: 3, stride: 2, pad: 1, bias: false", {2, 32, 9, 9}},
        Case{"twelve_channels", "num_output: 12, kernel_size: 3, pad: 1", {2, 12, 8, 8}, true},
        Case{"grouped", "num_output: 32, kernel_size: 3, pad: 1, groups: 2", {2, 32, 8, 8}},
        Case{"pointwise", "num_output: 48, kernel_size: 1", {2, 16, 7, 7}},
        Case{"first_layer", "num_output: 16, kernel_size: 3, pad: 1", {2, 3, 12, 12}, true, DType::f32}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

// The matrix products of small images take float32: there the layer widens
// its bfloat16 blobs (which the test above would see).
TEST(Bf16ConvBlobsMatmul, SmallImagesGoThroughFloat32Copies) {
  if (!dnnl_runs_bf16_kernels()) GTEST_SKIP() << "oneDNN runs no bfloat16 kernels here";
  const Case c{"matmul", "num_output: 32, kernel_size: 3, pad: 1", {2, 32, 4, 4}};
  std::mt19937_64 rng(12);
  const Tensor x = bf16_exact(c.x, rng), dx_in = bf16_exact(c.x, rng), dy = bf16_exact({2 * 32 * 16}, rng);
  const ConvRun f32 = run_conv(c, x, dy, dx_in, DType::f32, DType::f32, true, false);
  const ConvRun bf16 = run_conv(c, x, dy, dx_in, DType::bf16, DType::bf16, true, false);
  ASSERT_EQ(bf16.layer->engine(), "onednn matmul");
  EXPECT_GT(dynamic_cast<const ConvLayer&>(*bf16.layer).widened_bytes(), 0);
  expect_rounded(bf16.y, f32.y, "output");
  expect_rounded(bf16.dx, f32.dx, "input gradient");
}

// The bias gradient of a bfloat16 dy is that of its widened copy, bit for
// bit: the same float32 sums in the same order.
TEST(Bf16ConvBlobsBiasGrad, OfBfloat16IsThatOfItsWidenedCopy) {
  const int64_t batch = 5, channels = 24, pixels = 49;
  std::mt19937_64 rng(13);
  const Tensor dy = bf16_exact({batch * channels * pixels}, rng);
  const Tensor words = copy_as(dy, DType::bf16);
  std::vector<float> partial(channels * pixels), want(channels), got(channels, -1.f);
  conv_bias_grad(dy.data(), batch, channels, pixels, partial.data(), want.data());
  conv_bias_grad(words.bf16_data(), batch, channels, pixels, partial.data(), got.data());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), channels * sizeof(float)), 0);
}

#else

TEST(Bf16ConvBlobs, NeedsOneDnn) { GTEST_SKIP() << "built without oneDNN (libdnnl-dev)"; }

#endif

}  // namespace
}  // namespace poseidon::testing
