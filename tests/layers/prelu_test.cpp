// PReLU: gradient cases per channel and shared, the slopes' declaration
// (PyTorch's name, shape and initial value), values, and backward's contract.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("prelu_channels", "{name: p, type: prelu}", {{2, 3, 4, 5}});
GRAD_CASE("prelu_channels_2d", "{name: p, type: prelu}", {{6, 4}});
GRAD_CASE("prelu_shared", "{name: p, type: prelu, channel_shared: true}", {{2, 3, 4}});

namespace {

std::unique_ptr<Layer> make_prelu(const std::string& yaml, const Shape& in) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  layer->reshape({in});
  for (Param& p : layer->params()) {
    p.value = Tensor(p.shape);
    p.value.fill(p.init.value);
    p.grad = Tensor(p.shape);
  }
  return layer;
}

}  // namespace

TEST(Prelu, DeclaresPyTorchsSlopes) {
  auto per_channel = make_prelu("{name: act, type: prelu}", {2, 5, 3, 3});
  ASSERT_EQ(per_channel->params().size(), 1u);
  EXPECT_EQ(per_channel->param(0).name, "act.weight");
  EXPECT_EQ(per_channel->param(0).shape, Shape{5});
  EXPECT_EQ(per_channel->param(0).init.type, "constant");
  EXPECT_EQ(per_channel->param(0).init.value, 0.25f);
  EXPECT_TRUE(per_channel->param(0).learnable);
  auto shared = make_prelu("{name: act, type: prelu, channel_shared: true}", {2, 5, 3, 3});
  EXPECT_EQ(shared->param(0).shape, Shape{1});
}

TEST(Prelu, EachChannelUsesItsSlopeAndBackwardKeepsTheContract) {
  auto layer = make_prelu("{name: p, type: prelu}", {2, 2, 3});
  Tensor& a = layer->param(0).value;
  a[0] = 0.5f, a[1] = -2.f;
  Tensor x({2, 2, 3}), y({2, 2, 3}), dy({2, 2, 3}), dx({2, 2, 3});
  for (int64_t i = 0; i < 12; ++i) x[i] = static_cast<float>(i % 3) - 1.f, dy[i] = 1.f + i, dx[i] = 100.f;
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  for (int64_t i = 0; i < 12; ++i) {
    const float slope = (i / 3) % 2 == 0 ? 0.5f : -2.f;
    EXPECT_EQ(y[i], x[i] > 0 ? x[i] : slope * x[i]) << i;
  }
  layer->backward(io, ctx);
  layer->backward(io, ctx);
  for (int64_t i = 0; i < 12; ++i) {
    const float slope = (i / 3) % 2 == 0 ? 0.5f : -2.f;
    EXPECT_FLOAT_EQ(dx[i], 100.f + 2 * (x[i] > 0 ? dy[i] : slope * dy[i])) << i;
  }
  // Overwritten, not accumulated: x <= 0 at positions 0 and 1 of each row of 3.
  const Tensor& da = layer->param(0).grad;
  EXPECT_FLOAT_EQ(da[0], -1.f * 1 + 0.f * 2 + -1.f * 7 + 0.f * 8);
  EXPECT_FLOAT_EQ(da[1], -1.f * 4 + 0.f * 5 + -1.f * 10 + 0.f * 11);
}

// Large enough for the threaded loops, shared and per channel.
TEST(Prelu, LargeInputSlopeGradientsSumEveryValue) {
  const Shape shape = {4, 3, 64, 64};
  for (const char* yaml : {"{name: p, type: prelu}", "{name: p, type: prelu, channel_shared: true}"}) {
    SCOPED_TRACE(yaml);
    auto layer = make_prelu(yaml, shape);
    Tensor x(shape), y(shape), dy(shape);
    for (int64_t i = 0; i < x.numel(); ++i) x[i] = std::sin(0.37f * i), dy[i] = std::cos(0.11f * i);
    LayerIO io{{&x}, {&y}, {&dy}, {nullptr}};
    RunContext ctx;
    layer->forward(io, ctx);
    layer->backward(io, ctx);
    const int64_t slopes = layer->param(0).shape[0], spatial = 64 * 64;
    std::vector<double> expected(slopes, 0.0);
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x[i] <= 0) expected[slopes == 1 ? 0 : (i / spatial) % 3] += double(x[i]) * dy[i];
    for (int64_t c = 0; c < slopes; ++c)
      EXPECT_NEAR(layer->param(0).grad[c], expected[c], 1e-6 * std::max(1.0, std::abs(expected[c]))) << c;
    for (int64_t i = 0; i < x.numel(); i += 997) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.25f * x[i]) << i;
  }
}

TEST(Prelu, PerChannelSlopesNeedChannels) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: p, type: prelu}", "t"));
  EXPECT_THROW(layer->reshape({{8}}), ConfigError);
  auto shared =
      LayerRegistry::instance().create(ConfigNode::parse("{name: p, type: prelu, channel_shared: true}", "t"));
  EXPECT_EQ(shared->reshape({{8}}), std::vector<Shape>{{8}});
}

}  // namespace poseidon::testing
