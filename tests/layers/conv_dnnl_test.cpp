// The oneDNN convolution path against the im2col + GEMM path of the conv
// layer (itself checked against direct loops in conv_test.cpp), forward and
// backward, on shapes that reach the different kernels and layouts: groups,
// depthwise, strides whose output size rounds down, padding, dilation, 1x7
// and 7x1 kernels, pointwise, three- and one-channel first layers (whose
// weight gradient reads x and dy unblocked), wide channels;
// and small images, which run as matrix products (conv_matmul.h; in float32
// up to 2x2 outputs): 1x1 and 2x2 outputs with and without bias, padded,
// strided, 1x3 and 3x1 kernels, pointwise; and 4x4, which does not.
#include "layers/conv_dnnl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/registry.h"
#include "layers/conv_matmul.h"
#include "layers/engine_agreement.h"

namespace poseidon::testing {
namespace {

#ifdef POSEIDON_HAVE_DNNL

struct Case {
  std::string label;
  int64_t n, c, h, w, out, kh, kw, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;

  std::string yaml() const {
    auto pair = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; };
    return "{name: c, type: conv, engine: im2col, num_output: " + std::to_string(out) +
           ", kernel_size: " + pair(kh, kw) + ", stride: " + pair(sh, sw) + ", pad: " + pair(ph, pw) +
           ", dilation: " + pair(dh, dw) + ", groups: " + std::to_string(groups) +
           ", bias: " + (bias ? "true" : "false") + "}";
  }
  DnnlConvShape shape() const {
    return {.geom = {.channels = c,
                     .height = h,
                     .width = w,
                     .kernel_h = kh,
                     .kernel_w = kw,
                     .stride_h = sh,
                     .stride_w = sw,
                     .pad_h = ph,
                     .pad_w = pw,
                     .dilation_h = dh,
                     .dilation_w = dw},
            .batch = n,
            .num_output = out,
            .groups = groups,
            .bias = bias};
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

class ConvDnnlVsIm2col : public ::testing::TestWithParam<Case> {};

TEST_P(ConvDnnlVsIm2col, ForwardAndBackwardAgree) {
  const Case& k = GetParam();
  std::unique_ptr<DnnlConv> dnnl = DnnlConv::create(k.shape());
  ASSERT_NE(dnnl, nullptr) << "oneDNN declined the shape (reference kernels only)";
  EXPECT_EQ(dnnl->runs_as_matmuls(), MatmulConv::preferred(k.shape()));

  std::unique_ptr<Layer> layer = LayerRegistry::instance().create(ConfigNode::parse(k.yaml(), k.label));
  const Shape out_shape = layer->reshape({{k.n, k.c, k.h, k.w}}).at(0);
  std::mt19937_64 rng(7);
  for (Param& p : layer->params()) {
    p.value = Tensor(p.shape);
    p.grad = Tensor(p.shape);
    fill_uniform(p.value, rng);
  }
  Tensor x({k.n, k.c, k.h, k.w}), y(out_shape), dy(out_shape), dx(x.shape());
  fill_uniform(x, rng);
  fill_uniform(dy, rng);
  dx.fill(0.25f);
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);

  const Tensor& w = layer->param(0).value;
  const float* b = k.bias ? layer->param(1).value.data() : nullptr;
  Tensor y2(out_shape), dx2(x.shape()), dw2(w.shape()), db2({k.out});
  dx2.fill(0.25f);  // the input gradient is added onto what is there
  dw2.fill(9.f);    // parameter gradients are overwritten
  db2.fill(9.f);
  dnnl->forward(x.data(), w.data(), b, y2.data());
  dnnl->backward(x.data(), w.data(), dy.data(), dx2.data(), dw2.data(), db2.data(), false);
  expect_close(y2, y, "output", "oneDNN vs im2col");
  expect_close(dx2, dx, "input grad", "oneDNN vs im2col");
  expect_close(dw2, layer->param(0).grad, "weight grad", "oneDNN vs im2col");
  if (k.bias) expect_close(db2, layer->param(1).grad, "bias grad", "oneDNN vs im2col");

  // Told that dx holds nothing yet, backward writes every element of it.
  Tensor dx3(x.shape());
  dx3.fill(std::numeric_limits<float>::quiet_NaN());
  dnnl->backward(x.data(), w.data(), dy.data(), dx3.data(), dw2.data(), db2.data(), true);
  for (int64_t i = 0; i < dx3.numel(); ++i) dx3[i] += 0.25f;
  expect_close(dx3, dx, "input grad written over NaN", "oneDNN vs im2col");

  // Without an input gradient (the first layer), for a dy of twice the
  // values (exactly), the parameter gradients double: dy is read afresh.
  Tensor dy_twice(out_shape), dw_twice(w.shape()), db_twice({k.out});
  for (int64_t i = 0; i < dy.numel(); ++i) dy_twice[i] = 2.f * dy[i];
  for (int64_t i = 0; i < dw_twice.numel(); ++i) dw_twice[i] = 2.f * layer->param(0).grad[i];
  if (k.bias)
    for (int64_t i = 0; i < k.out; ++i) db_twice[i] = 2.f * layer->param(1).grad[i];
  dw2.fill(9.f);
  db2.fill(9.f);
  dnnl->backward(x.data(), w.data(), dy_twice.data(), nullptr, dw2.data(), db2.data(), false);
  expect_close(dw2, dw_twice, "weight grad without input grad", "oneDNN vs im2col");
  if (k.bias) expect_close(db2, db_twice, "bias grad without input grad", "oneDNN vs im2col");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvDnnlVsIm2col,
    ::testing::Values(Case{"groups2_stride2_pad1", 3, 4, 9, 9, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},
                      Case{"dilation2_pad2", 3, 3, 10, 11, 5, 3, 3, 1, 1, 2, 2, 2, 2},
                      Case{"kernel_1x7", 3, 8, 7, 17, 8, 1, 7, 1, 1, 0, 3},
                      Case{"kernel_7x1_stride2_rounds_down", 3, 5, 16, 8, 4, 7, 1, 2, 2, 3, 0},
                      Case{"depthwise_no_bias", 3, 8, 12, 12, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, false},
                      Case{"pointwise", 3, 16, 8, 8, 32, 1, 1},
                      Case{"pointwise_stride3_rounds_down", 3, 16, 5, 5, 16, 1, 1, 3, 3},
                      Case{"rgb_input_5x5", 3, 3, 20, 20, 16, 5, 5, 1, 1, 2, 2},
                      Case{"grey_input_5x5", 3, 1, 14, 14, 20, 5, 5},
                      Case{"small_grey_3x3_pad1", 3, 1, 3, 3, 8, 3, 3, 1, 1, 1, 1},
                      Case{"wide_channels", 3, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1},
                      Case{"wide_groups4_dilation2_stride2", 3, 32, 15, 13, 48, 3, 3, 2, 2, 2, 2, 2, 2, 4},
                      Case{"small_2x2_pad1", 4, 32, 2, 2, 48, 3, 3, 1, 1, 1, 1},
                      Case{"small_2x2_pad1_no_bias", 3, 16, 2, 2, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},
                      Case{"small_4x4_pad1_no_bias", 3, 16, 4, 4, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},
                      Case{"small_1x1_pad1", 5, 32, 1, 1, 16, 3, 3, 1, 1, 1, 1},
                      Case{"small_kernel_1x3", 3, 24, 2, 2, 16, 1, 3, 1, 1, 0, 1},
                      Case{"small_kernel_3x1_no_bias", 3, 24, 2, 2, 16, 3, 1, 1, 1, 1, 0, 1, 1, 1, false},
                      Case{"small_stride2_rounds_down", 3, 16, 6, 6, 24, 3, 3, 2, 2},
                      Case{"small_pointwise", 4, 32, 2, 2, 16, 1, 1}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

#else

TEST(ConvDnnlVsIm2col, NeedsOneDnn) { GTEST_SKIP() << "built without oneDNN (libdnnl-dev)"; }

#endif

}  // namespace
}  // namespace poseidon::testing
