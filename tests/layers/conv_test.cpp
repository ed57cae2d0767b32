// Convolution: gradient cases for every code path (generic im2col, 1x1
// pointwise, chunked batches), and forward and backward checked against a
// direct seven-loop reference written independently of im2col.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/im2col.h"
#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("conv_3x3_pad1", "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1}", {{2, 2, 5, 5}});
GRAD_CASE("conv_1x3", "{name: c, type: conv, num_output: 2, kernel_size: [1, 3], pad: [0, 1]}", {{2, 2, 5, 6}});
GRAD_CASE("conv_3x1_stride2", "{name: c, type: conv, num_output: 2, kernel_size: [3, 1], stride: 2}", {{2, 2, 7, 5}});
GRAD_CASE("conv_stride2_pad1", "{name: c, type: conv, num_output: 3, kernel_size: 3, stride: 2, pad: 1}",
          {{2, 2, 7, 7}});
GRAD_CASE("conv_dilation2", "{name: c, type: conv, num_output: 2, kernel_size: 3, dilation: 2, pad: 1}",
          {{2, 2, 7, 7}});
GRAD_CASE("conv_groups2", "{name: c, type: conv, num_output: 4, kernel_size: 3, groups: 2, pad: 1}", {{2, 4, 5, 5}});
GRAD_CASE("conv_no_bias", "{name: c, type: conv, num_output: 3, kernel_size: 2, bias: false}", {{2, 2, 5, 5}});
GRAD_CASE("conv_1x1_pointwise", "{name: c, type: conv, num_output: 3, kernel_size: 1}", {{2, 3, 5, 5}});
GRAD_CASE("conv_1x1_groups2", "{name: c, type: conv, num_output: 4, kernel_size: 1, groups: 2}", {{2, 4, 5, 5}});
// Small images, which run as matrix products (layers/conv_matmul.h).
GRAD_CASE("conv_2x2_image_pad1", "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1}", {{2, 4, 2, 2}});
// With a ReLU fused (core/relu_fusion.h), on each engine: oneDNN's direct
// convolution, its products on a small image, im2col + GEMM. The smaller
// step keeps the finite differences off the ReLU's kink: a weight moves all
// of its channel's outputs, and at 1e-2 a few of them cross zero.
GRAD_CASE(.name = "conv_relu_fused", .yaml = "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1}",
          .inputs = {{2, 2, 5, 5}}, .step = 1e-3, .fuse_relu = true);
GRAD_CASE(.name = "conv_2x2_image_relu_fused", .yaml = "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1}",
          .inputs = {{2, 4, 2, 2}}, .step = 1e-3, .fuse_relu = true);
GRAD_CASE(.name = "conv_im2col_relu_fused",
          .yaml = "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1, engine: im2col}",
          .inputs = {{2, 2, 5, 5}}, .step = 1e-3, .fuse_relu = true);
GRAD_CASE("conv_2x2_image_3x1", "{name: c, type: conv, num_output: 3, kernel_size: [3, 1], pad: [1, 0]}",
          {{2, 4, 2, 2}});
GRAD_CASE("conv_1x1_image_pad1_no_bias", "{name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1, bias: false}",
          {{3, 4, 1, 1}});
GRAD_CASE("conv_1x1_stride2", "{name: c, type: conv, num_output: 2, kernel_size: 1, stride: 2}", {{2, 2, 5, 5}});

namespace {

struct ConvSpec {
  std::string label;
  int64_t n, c, h, w, out;
  int64_t kh, kw, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;

  std::string yaml() const {
    auto pair = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; };
    return "{name: c, type: conv, num_output: " + std::to_string(out) + ", kernel_size: " + pair(kh, kw) +
           ", stride: " + pair(sh, sw) + ", pad: " + pair(ph, pw) + ", dilation: " + pair(dh, dw) +
           ", groups: " + std::to_string(groups) + ", bias: " + (bias ? "true" : "false") + "}";
  }
  // The output size formula of PyTorch's Conv2d documentation.
  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
};

void PrintTo(const ConvSpec& s, std::ostream* os) { *os << s.label; }

void fill_uniform(Tensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = uni(rng);
}

// A conv layer with bound, randomly filled parameters and its NCHW index helpers.
struct ConvFixture {
  ConvSpec s;
  std::unique_ptr<Layer> layer;
  Tensor x, y;

  explicit ConvFixture(const ConvSpec& spec, std::mt19937_64& rng) : s(spec) {
    layer = LayerRegistry::instance().create(ConfigNode::parse(s.yaml(), s.label));
    std::vector<Shape> out = layer->reshape({{s.n, s.c, s.h, s.w}});
    EXPECT_EQ(out.at(0), (Shape{s.n, s.out, s.oh(), s.ow()}));
    for (auto& p : layer->params()) {
      p.value = Tensor(p.shape);
      p.grad = Tensor(p.shape);
      fill_uniform(p.value, rng);
    }
    x = Tensor({s.n, s.c, s.h, s.w});
    y = Tensor(out.at(0));
    fill_uniform(x, rng);
  }
  int64_t xi(int64_t n, int64_t c, int64_t iy, int64_t ix) const { return ((n * s.c + c) * s.h + iy) * s.w + ix; }
  int64_t yi(int64_t n, int64_t o, int64_t oy, int64_t ox) const {
    return ((n * s.out + o) * s.oh() + oy) * s.ow() + ox;
  }
  int64_t wi(int64_t o, int64_t ci, int64_t i, int64_t j) const {
    return ((o * (s.c / s.groups) + ci) * s.kh + i) * s.kw + j;
  }
  // Visits every (output, input, weight) index triple that the convolution multiplies.
  template <class Fn>
  void for_each_product(Fn fn) const {
    const int64_t cg = s.c / s.groups, og = s.out / s.groups;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t o = 0; o < s.out; ++o)
        for (int64_t oy = 0; oy < s.oh(); ++oy)
          for (int64_t ox = 0; ox < s.ow(); ++ox)
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t i = 0; i < s.kh; ++i)
                for (int64_t j = 0; j < s.kw; ++j) {
                  int64_t iy = oy * s.sh - s.ph + i * s.dh, ix = ox * s.sw - s.pw + j * s.dw;
                  if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                  fn(yi(n, o, oy, ox), xi(n, o / og * cg + ci, iy, ix), wi(o, ci, i, j));
                }
  }
};

void expect_near_all(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int reported = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-4 * (1 + std::abs(want[i])) && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
}

class ConvReference : public ::testing::TestWithParam<ConvSpec> {};

TEST_P(ConvReference, ForwardMatchesDirectLoops) {
  std::mt19937_64 rng(42);
  ConvFixture f(GetParam(), rng);
  const Tensor& w = f.layer->param(0).value;
  std::vector<double> want(f.y.numel(), 0.0);
  if (f.s.bias)
    for (int64_t k = 0; k < f.y.numel(); ++k) want[k] = f.layer->param(1).value[k / (f.s.oh() * f.s.ow()) % f.s.out];
  f.for_each_product([&](int64_t y, int64_t x, int64_t wi) { want[y] += double(f.x[x]) * w[wi]; });
  LayerIO io{{&f.x}, {&f.y}, {}, {}};
  RunContext ctx;
  f.layer->forward(io, ctx);
  expect_near_all(f.y, want, "output");
}

TEST_P(ConvReference, BackwardMatchesDirectLoops) {
  std::mt19937_64 rng(43);
  ConvFixture f(GetParam(), rng);
  Tensor dy(f.y.shape()), dx(f.x.shape());
  fill_uniform(dy, rng);
  dx.fill(0.5f);                                       // input gradients accumulate onto what is there
  for (auto& p : f.layer->params()) p.grad.fill(7.f);  // parameter gradients are overwritten
  const Tensor& w = f.layer->param(0).value;
  std::vector<double> want_dx(dx.numel(), 0.5), want_dw(w.numel(), 0.0), want_db(f.s.out, 0.0);
  f.for_each_product([&](int64_t y, int64_t x, int64_t wi) {
    want_dx[x] += double(w[wi]) * dy[y];
    want_dw[wi] += double(f.x[x]) * dy[y];
  });
  for (int64_t k = 0; k < dy.numel(); ++k) want_db[k / (f.s.oh() * f.s.ow()) % f.s.out] += dy[k];
  LayerIO io{{&f.x}, {&f.y}, {&dy}, {&dx}};
  RunContext ctx;
  f.layer->forward(io, ctx);
  f.layer->backward(io, ctx);
  expect_near_all(dx, want_dx, "input grad");
  expect_near_all(f.layer->param(0).grad, want_dw, "weight grad");
  if (f.s.bias) expect_near_all(f.layer->param(1).grad, want_db, "bias grad");
}

// Batch of 8 images whose columns need ~1.2M floats each: more than one chunk.
const ConvSpec kChunked{"chunked_batch_groups", 8, 32, 64, 64, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4};

INSTANTIATE_TEST_SUITE_P(
    Configs, ConvReference,
    ::testing::Values(ConvSpec{"plain_3x3_pad1", 2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1},
                      ConvSpec{"asym_stride_pad_dilation_groups", 2, 4, 9, 7, 6, 3, 2, 2, 1, 1, 2, 2, 1, 2},
                      ConvSpec{"depthwise_stride2", 2, 4, 6, 6, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4},
                      ConvSpec{"pointwise_groups_no_bias", 3, 4, 5, 6, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2, false},
                      ConvSpec{"pointwise", 2, 5, 4, 3, 3, 1, 1},
                      // Strided 1x1 (layers/conv_subsample.h): the stride-1 convolution
                      // of the pixels read, its input gradient scattered back onto dx.
                      ConvSpec{"pointwise_stride2", 2, 16, 10, 10, 8, 1, 1, 2, 2},
                      ConvSpec{"pointwise_stride3x2_odd_edges", 2, 16, 11, 8, 8, 1, 1, 3, 2},
                      ConvSpec{"pointwise_stride2_groups_no_bias", 2, 16, 9, 9, 8, 1, 1, 2, 2, 0, 0, 1, 1, 2, false},
                      ConvSpec{"small_2x2_pad1", 3, 8, 2, 2, 6, 3, 3, 1, 1, 1, 1},
                      ConvSpec{"small_2x2_stride2_pad1_no_bias", 2, 6, 4, 4, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},
                      ConvSpec{"small_1x3_on_2x2", 2, 6, 2, 2, 4, 1, 3, 1, 1, 0, 1},
                      ConvSpec{"small_1x1_image", 4, 8, 1, 1, 6, 3, 3, 1, 1, 1, 1}, kChunked),
    [](const auto& info) { return info.param.label; });

TEST(Conv, ChunkedCaseReallySplitsTheBatch) {
  const ConvSpec& s = kChunked;
  EXPECT_LT(images_per_chunk(s.c * s.kh * s.kw * s.oh() * s.ow(), s.n), s.n);
}

std::unique_ptr<Layer> make_conv(const std::string& yaml) {
  return LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
}

// Runs `build` and expects a poseidon::Error whose message names `key`.
template <class Fn>
void expect_error_naming(Fn build, const std::string& key) {
  try {
    build();
    ADD_FAILURE() << "expected an error naming '" << key << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(Conv, ParametersFollowPyTorchLayoutAndFanIn) {
  auto layer = make_conv("{name: c, type: conv, num_output: 6, kernel_size: [3, 2], groups: 2}");
  layer->reshape({{1, 4, 8, 8}});
  ASSERT_EQ(layer->params().size(), 2u);
  EXPECT_EQ(layer->param(0).name, "c.weight");
  EXPECT_EQ(layer->param(0).shape, (Shape{6, 2, 3, 2}));
  EXPECT_EQ(layer->param(0).init.fan_in, 2 * 3 * 2);
  EXPECT_EQ(layer->param(1).name, "c.bias");
  EXPECT_EQ(layer->param(1).shape, (Shape{6}));
  EXPECT_EQ(layer->param(1).init.fan_in, 2 * 3 * 2);
  auto no_bias = make_conv("{name: c, type: conv, num_output: 6, kernel_size: 3, bias: false}");
  no_bias->reshape({{1, 4, 8, 8}});
  EXPECT_EQ(no_bias->params().size(), 1u);
}

TEST(Conv, FlopsCountEveryMultiplyAdd) {
  auto layer = make_conv("{name: c, type: conv, num_output: 8, kernel_size: 3, pad: 1, stride: 2, groups: 2}");
  layer->reshape({{2, 4, 10, 10}});
  // 2 images x 8 outputs x 5x5 positions x (4/2 channels x 3x3 taps), 2 flops each.
  EXPECT_EQ(layer->forward_flops({{2, 4, 10, 10}}), 2 * 2 * 8 * 25 * 2 * 9);
}

TEST(Conv, RejectsBadConfigsNamingTheKey) {
  expect_error_naming(
      [] {
        make_conv("{name: c, type: conv, num_output: 4, kernel_size: 3, groups: 3}")->reshape({{1, 6, 5, 5}});
      },
      "groups");
  expect_error_naming(
      [] {
        make_conv("{name: c, type: conv, num_output: 6, kernel_size: 3, groups: 4}")->reshape({{1, 4, 5, 5}});
      },
      "groups");
  expect_error_naming(
      [] {
        make_conv("{name: c, type: conv, num_output: 4, kernel_size: 7, pad: 1}")->reshape({{1, 3, 4, 4}});
      },
      "kernel_size");
  expect_error_naming(
      [] {
        make_conv("{name: c, type: conv, num_output: 4, kernel_size: 3, dilation: 3}")->reshape({{1, 3, 6, 6}});
      },
      "kernel_size");
  expect_error_naming([] { make_conv("{name: c, type: conv, num_output: 4, kernel_size: [1, 2, 3]}"); }, "kernel_size");
  expect_error_naming([] { make_conv("{name: c, type: conv, num_output: 4, kernel_size: 3, stride: 0}"); }, "stride");
  expect_error_naming([] { make_conv("{name: c, type: conv, num_output: 4, kernel_size: 3, pad: -1}"); }, "pad");
  expect_error_naming([] { make_conv("{name: c, type: conv, num_output: 0, kernel_size: 3}"); }, "num_output");
  expect_error_naming([] { make_conv("{name: c, type: conv, kernel_size: 3}"); }, "num_output");
  expect_error_naming([] { make_conv("{name: c, type: conv, num_output: 4}"); }, "kernel_size");
  expect_error_naming([] { make_conv("{name: c, type: conv, num_output: 4, kernel_size: 3, padding: 1}"); }, "padding");
}

TEST(Conv, ChangingInputChannelsIsAnError) {
  auto layer = make_conv("{name: c, type: conv, num_output: 4, kernel_size: 3}");
  layer->reshape({{2, 3, 8, 8}});
  EXPECT_NO_THROW(layer->reshape({{5, 3, 10, 12}}));  // batch and spatial size may change
  EXPECT_THROW(layer->reshape({{2, 5, 8, 8}}), Error);
}

}  // namespace
}  // namespace poseidon::testing
