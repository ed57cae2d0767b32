// The conv layer's Winograd engine (engine: winograd, layers/conv_winograd.h)
// against its im2col + GEMM engine (itself checked against direct loops in
// conv_test.cpp), forward and backward, on shapes that reach the transforms'
// edges: sizes whose last tile row and column fall partly outside the
// output, padding 0, 1 and 2, unequal padding, non-square images, no bias,
// a fused ReLU, and a batch that runs in several chunks. The same shapes in
// bf16: the engine's results on the operands it rounds as it reads them,
// bit for bit against float32 on operands rounded beforehand. Plus finite
// differences through the layer, and the shapes it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "bf16_check.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/registry.h"
#include "core/relu_fusion.h"
#include "layers/dnnl_support.h"
#include "layers/engine_agreement.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

// F(4x4, 3x3) rounds about five times as much as a direct sum (`poseidon
// check-layer conv --set num_output=2 kernel_size=3 bias=false engine=...
// --shape 2,3,6,7`: largest relative error of the differences 7.9e-5 with
// im2col, 4.3e-4 with winograd, under the checker's 1e-3).
GRAD_CASE("conv_winograd_pad1", "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1, engine: winograd}",
          {{2, 2, 5, 5}});
GRAD_CASE("conv_winograd_pad0_no_bias",
          "{name: c, type: conv, num_output: 2, kernel_size: 3, bias: false, engine: winograd}", {{2, 3, 6, 7}});
GRAD_CASE(.name = "conv_winograd_relu_fused",
          .yaml = "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1, engine: winograd}",
          .inputs = {{2, 2, 5, 5}}, .step = 1e-3, .fuse_relu = true);

namespace {

struct Case {
  std::string label;
  int64_t n, c, h, w, out, ph, pw;
  bool bias = true, relu = false;

  std::string yaml(const std::string& engine) const {
    return "{name: c, type: conv, engine: " + engine + ", num_output: " + std::to_string(out) +
           ", kernel_size: 3, pad: [" + std::to_string(ph) + ", " + std::to_string(pw) +
           "], bias: " + (bias ? "true" : "false") + "}";
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// One engine's layer at `precision` with its tensors, its parameters filled
// from a fixed seed; with round_operands x, the weight and dy are rounded to
// bfloat16 before the run. x_before and w_before keep the operands as the
// layer received them.
struct EngineRun {
  std::unique_ptr<Layer> layer;
  Tensor x, y, dy, dx, x_before, w_before;

  EngineRun(const Case& k, const std::string& engine, bool overwrite_dx, Precision precision = Precision::fp32,
            bool round_operands = false) {
    layer = LayerRegistry::instance().create(ConfigNode::parse(k.yaml(engine), k.label));
    layer->set_precision(precision);
    const Shape out_shape = layer->reshape({{k.n, k.c, k.h, k.w}}).at(0);
    if (k.relu) {
      EXPECT_TRUE(dynamic_cast<ReluFusable&>(*layer).fuse_relu());
    }
    std::mt19937_64 rng(11);
    for (Param& p : layer->params()) {
      p.value = Tensor(p.shape);
      p.grad = Tensor(p.shape);
      p.grad.fill(9.f);  // parameter gradients are overwritten
      fill_uniform(p.value, rng);
    }
    x = Tensor({k.n, k.c, k.h, k.w});
    y = Tensor(out_shape);
    dy = Tensor(out_shape);
    dx = Tensor(x.shape());
    fill_uniform(x, rng);
    fill_uniform(dy, rng);
    if (round_operands)
      for (Tensor* t : {&x, &layer->param(0).value, &dy}) round_to_bf16(t->data(), t->numel());
    x_before = Tensor(x.shape());
    x_before.copy_from(x);
    w_before = Tensor(layer->param(0).shape);
    w_before.copy_from(layer->param(0).value);
    // Added onto, or written over whatever is there.
    dx.fill(overwrite_dx ? std::numeric_limits<float>::quiet_NaN() : 0.25f);
    LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
    if (overwrite_dx) io.in_grad_unset = {true};
    RunContext ctx;
    layer->forward(io, ctx);
    layer->backward(io, ctx);
  }
};

class ConvWinogradVsIm2col : public ::testing::TestWithParam<Case> {};

TEST_P(ConvWinogradVsIm2col, ForwardAndBackwardAgree) {
  const Case& k = GetParam();
  for (bool overwrite_dx : {false, true}) {
    SCOPED_TRACE(overwrite_dx ? "input grad written" : "input grad added");
    EngineRun winograd(k, "winograd", overwrite_dx), im2col(k, "im2col", overwrite_dx);
    ASSERT_EQ(winograd.layer->engine(), "winograd");
    ASSERT_EQ(im2col.layer->engine(), "im2col");
    expect_close(winograd.y, im2col.y, "output", "winograd vs im2col");
    expect_close(winograd.dx, im2col.dx, "input grad", "winograd vs im2col");
    expect_close(winograd.layer->param(0).grad, im2col.layer->param(0).grad, "weight grad", "winograd vs im2col");
    if (k.bias)
      expect_close(winograd.layer->param(1).grad, im2col.layer->param(1).grad, "bias grad", "winograd vs im2col");
    if (k.relu) {
      for (int64_t i = 0; i < winograd.y.numel(); ++i) ASSERT_GE(winograd.y[i], 0.f) << "ReLU'd output at " << i;
    }
  }
}

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.numel() * sizeof(float)), 0) << what << " differs";
}

// In bf16 without oneDNN's bfloat16 kernels the engine rounds x and the
// weight as it reads them, not into copies: its results are, bit for bit,
// the float32 engine's on operands rounded beforehand, and the operands it
// was handed stay as they were.
class ConvWinogradBf16 : public ::testing::TestWithParam<Case> {};

TEST_P(ConvWinogradBf16, MultipliesRoundedOperandsAndLeavesThemAlone) {
  const Case& k = GetParam();
  EngineRun bf16(k, "winograd", false, Precision::bf16);
  if (dnnl_runs_bf16_kernels() && bf16.layer->engine() != "winograd") GTEST_SKIP() << "oneDNN's bfloat16 kernels run";
  ASSERT_EQ(bf16.layer->engine(), "winograd");
  EngineRun rounded(k, "winograd", false, Precision::fp32, true);
  expect_same_bits(bf16.y, rounded.y, "output");
  expect_same_bits(bf16.dx, rounded.dx, "input grad");
  for (size_t p = 0; p < bf16.layer->params().size(); ++p)
    expect_same_bits(bf16.layer->param(p).grad, rounded.layer->param(p).grad, "param grad " + std::to_string(p));
  expect_same_bits(bf16.x, bf16.x_before, "x after the run");
  expect_same_bits(bf16.layer->param(0).value, bf16.w_before, "weight after the run");
  EXPECT_GT(norm_relative_error(bf16.x, rounded.x), 0.0) << "rounding left x as it was: the comparison proves nothing";
}

const Case kShapes[] = {Case{"pad1_even", 2, 8, 8, 8, 16, 1, 1}, Case{"pad1_odd_partial_tiles", 3, 5, 7, 9, 6, 1, 1},
                        Case{"pad0_odd", 2, 4, 9, 7, 5, 0, 0}, Case{"pad0_even", 2, 4, 6, 6, 3, 0, 0},
                        Case{"pad2", 2, 3, 5, 6, 4, 2, 2}, Case{"pad_1x0_no_bias", 2, 6, 7, 8, 4, 1, 0, false},
                        Case{"smallest_3x3_pad0", 3, 2, 3, 3, 2, 0, 0}, Case{"one_pixel_pad1", 4, 8, 1, 1, 8, 1, 1},
                        Case{"relu_fused", 2, 16, 10, 10, 16, 1, 1, true, true},
                        Case{"wide_channels", 2, 64, 12, 12, 48, 1, 1},
                        // Block by block: 5x5 tiles an image, blocks of 8 rows
                        // of tiles (40 tiles, five whole vectors), so four
                        // blocks that cross images, over the threads; 20 input
                        // channels (the filter gradient's rows padded to 24)
                        // and 38 output channels (2 past the product's 4-row
                        // blocks).
                        Case{"blocks_across_images", 6, 20, 20, 20, 38, 1, 1},
                        // Two channels: blocks as large as the transforms'
                        // buffers allow in whole panels (24 rows of 10 tiles,
                        // 240 of 256) over 400 tiles.
                        Case{"few_channels_many_tiles", 4, 2, 40, 40, 2, 1, 1},
                        // Filters of 128 x 72 channels go through in chunks of
                        // images; 14 images of 128 channels at 32x32 (64 tiles
                        // of 36 positions each, V and M) fill a chunk of
                        // core/im2col.h's budget: 15 run as two.
                        Case{"batch_in_two_chunks", 15, 128, 32, 32, 72, 1, 1}};

std::string label(const ::testing::TestParamInfo<Case>& info) { return info.param.label; }

INSTANTIATE_TEST_SUITE_P(Shapes, ConvWinogradVsIm2col, ::testing::ValuesIn(kShapes), label);
INSTANTIATE_TEST_SUITE_P(Shapes, ConvWinogradBf16, ::testing::ValuesIn(kShapes), label);

// engine: auto picks Winograd only where oneDNN's kernels stop at AVX2 (or
// without oneDNN), for 3x3 stride-1 layers of 32 channels in and out and
// outputs of 4x4 and up; engine: onednn keeps the direct kernels there.
TEST(ConvWinograd, AutoPicksItForWide3x3OnAvx2Only) {
  auto engine_of = [](const std::string& keys, const Shape& in) {
    std::unique_ptr<Layer> layer = LayerRegistry::instance().create(
        ConfigNode::parse("{name: c, type: conv, kernel_size: 3, pad: 1, " + keys + "}", "auto.yaml"));
    layer->reshape({in});
    return layer->engine();
  };
  const std::string wide = dnnl_uses_avx512() ? "onednn" : "winograd";
  EXPECT_EQ(engine_of("num_output: 64", {2, 64, 8, 8}), wide);
  EXPECT_EQ(engine_of("num_output: 256", {2, 128, 4, 5}), wide);
  EXPECT_EQ(engine_of("num_output: 32", {2, 32, 8, 8}), wide);
  EXPECT_NE(engine_of("num_output: 128", {2, 16, 8, 8}), "winograd");   // too few in
  EXPECT_NE(engine_of("num_output: 16", {2, 128, 8, 8}), "winograd");   // too few out
  EXPECT_NE(engine_of("num_output: 128", {2, 128, 3, 8}), "winograd");  // 3 output rows
  EXPECT_NE(engine_of("num_output: 128, stride: 2", {2, 128, 8, 8}), "winograd");
#ifdef POSEIDON_HAVE_DNNL
  EXPECT_EQ(engine_of("num_output: 128, engine: onednn", {2, 128, 8, 8}), "onednn");
#endif
}

TEST(ConvWinograd, RefusesWhatItDoesNotCompute) {
  for (const char* keys : {"kernel_size: 5, pad: 2", "kernel_size: 3, stride: 2", "kernel_size: 3, dilation: 2",
                           "kernel_size: 3, groups: 2", "kernel_size: 3, pad: 3"}) {
    SCOPED_TRACE(keys);
    std::unique_ptr<Layer> layer = LayerRegistry::instance().create(ConfigNode::parse(
        std::string("{name: c, type: conv, engine: winograd, num_output: 4, ") + keys + "}", "refused.yaml"));
    try {
      layer->reshape({{1, 4, 9, 9}});
      FAIL() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("engine winograd needs a 3x3 kernel"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace poseidon::testing
