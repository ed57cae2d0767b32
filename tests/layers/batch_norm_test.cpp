// Batch normalisation: gradient cases in both phases, outputs and running
// statistics against sums computed here, parameter declarations and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("batch_norm_train_2d", "{name: bn, type: batch_norm}", {{8, 2}});
GRAD_CASE("batch_norm_train_4d", "{name: bn, type: batch_norm}", {{2, 3, 2, 2}});
GRAD_CASE("batch_norm_train_no_affine", "{name: bn, type: batch_norm, affine: false}", {{2, 3, 2, 2}});
GRAD_CASE("batch_norm_test_4d", "{name: bn, type: batch_norm}", {{2, 3, 2, 2}}, {}, false);
// With a ReLU fused (core/relu_fusion.h): the backward masks dy by its own output.
GRAD_CASE(.name = "batch_norm_train_relu_fused", .yaml = "{name: bn, type: batch_norm}", .inputs = {{2, 3, 2, 2}},
          .fuse_relu = true);
GRAD_CASE(.name = "batch_norm_test_relu_fused", .yaml = "{name: bn, type: batch_norm}", .inputs = {{2, 3, 2, 2}},
          .train = false, .fuse_relu = true);

namespace {

// A layer with its parameters bound to fresh tensors holding their initial values.
std::unique_ptr<Layer> make_bn(const std::string& yaml, const Shape& in) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  layer->reshape({in});
  for (auto& p : layer->params()) {
    EXPECT_EQ(p.init.type, "constant") << p.name;
    p.value = Tensor(p.shape);
    p.value.fill(p.init.value);
    if (p.learnable) p.grad = Tensor(p.shape);
  }
  return layer;
}

Param& find(Layer& layer, const std::string& name) {
  for (auto& p : layer.params())
    if (p.name == name) return p;
  throw std::runtime_error("no parameter " + name);
}

struct ChannelStats {
  double mean = 0, biased_var = 0, unbiased_var = 0;
};

// Statistics of channel c of an [N, C, S] tensor, straight from the definition.
ChannelStats stats(const Tensor& x, int64_t c) {
  const int64_t n = x.dim(0), channels = x.dim(1), s = x.numel() / (n * channels);
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < s; ++j) v.push_back(x[(i * channels + c) * s + j]);
  ChannelStats st;
  for (double a : v) st.mean += a / v.size();
  double sq = 0;
  for (double a : v) sq += (a - st.mean) * (a - st.mean);
  st.biased_var = sq / v.size();
  st.unbiased_var = sq / (v.size() - 1);
  return st;
}

void fill_pattern(Tensor& x, float shift) {
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = std::sin(0.7f * i + shift) * 3.f + 0.1f * i;
}

}  // namespace

TEST(BatchNorm, DeclaresParametersAndBuffersLikePyTorch) {
  auto layer = make_bn("{name: bn, type: batch_norm}", {2, 5, 3, 3});
  ASSERT_EQ(layer->params().size(), 4u);
  const char* names[] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};
  const bool learnable[] = {true, true, false, false};
  const float init[] = {1.f, 0.f, 0.f, 1.f};
  for (size_t i = 0; i < 4; ++i) {
    const Param& p = layer->param(i);
    EXPECT_EQ(p.name, names[i]);
    EXPECT_EQ(p.shape, Shape{5});
    EXPECT_EQ(p.learnable, learnable[i]) << p.name;
    EXPECT_EQ(p.init.value, init[i]) << p.name;
  }
  auto plain = make_bn("{name: bn, type: batch_norm, affine: false}", {2, 5});
  ASSERT_EQ(plain->params().size(), 2u);
  EXPECT_EQ(plain->param(0).name, "bn.running_mean");
  EXPECT_EQ(plain->param(1).name, "bn.running_var");
}

TEST(BatchNorm, TrainNormalisesAndUpdatesRunningStatsOverTwoForwards) {
  const double eps = 1e-3, momentum = 0.2;
  auto layer = make_bn("{name: bn, type: batch_norm, eps: 0.001, momentum: 0.2}", {3, 2, 1, 4});
  find(*layer, "bn.weight").value[1] = 2.f;
  find(*layer, "bn.bias").value[0] = -0.5f;
  Tensor x({3, 2, 1, 4}), y({3, 2, 1, 4});
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {}, {}};
  std::vector<double> running_mean = {0, 0}, running_var = {1, 1};
  for (float shift : {0.f, 1.3f}) {
    fill_pattern(x, shift);
    layer->forward(io, ctx);
    for (int64_t c = 0; c < 2; ++c) {
      ChannelStats st = stats(x, c);
      running_mean[c] = (1 - momentum) * running_mean[c] + momentum * st.mean;
      running_var[c] = (1 - momentum) * running_var[c] + momentum * st.unbiased_var;
      const double w = c == 1 ? 2.0 : 1.0, b = c == 0 ? -0.5 : 0.0;
      for (int64_t n = 0; n < 3; ++n)
        for (int64_t s = 0; s < 4; ++s) {
          const int64_t i = (n * 2 + c) * 4 + s;
          const double expected = (x[i] - st.mean) / std::sqrt(st.biased_var + eps) * w + b;
          EXPECT_NEAR(y[i], expected, 1e-5) << "element " << i;
        }
    }
  }
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(find(*layer, "bn.running_mean").value[c], running_mean[c], 1e-6) << c;
    EXPECT_NEAR(find(*layer, "bn.running_var").value[c], running_var[c], 1e-5) << c;
  }
}

// Large enough for the threaded loops: every channel comes out with mean 0 and
// biased variance var / (var + eps).
TEST(BatchNorm, LargeInputIsNormalisedPerChannel) {
  const Shape shape = {33, 4, 16, 16};
  auto layer = make_bn("{name: bn, type: batch_norm}", shape);
  Tensor x(shape), y(shape);
  fill_pattern(x, 0.f);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = x[i] * 1e-3f + static_cast<float>(i / 256 % 4);
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {}, {}};
  layer->forward(io, ctx);
  for (int64_t c = 0; c < 4; ++c) {
    ChannelStats in = stats(x, c), out = stats(y, c);
    EXPECT_NEAR(out.mean, 0.0, 1e-4) << c;
    EXPECT_NEAR(out.biased_var, in.biased_var / (in.biased_var + 1e-5), 1e-3) << c;
    EXPECT_NEAR(find(*layer, "bn.running_mean").value[c], 0.1 * in.mean, 1e-5) << c;
  }
}

TEST(BatchNorm, TestPhaseUsesRunningStatsAndLeavesThemAlone) {
  auto layer = make_bn("{name: bn, type: batch_norm}", {4, 3});
  Tensor& rm = find(*layer, "bn.running_mean").value;
  Tensor& rv = find(*layer, "bn.running_var").value;
  const float mean[] = {0.5f, -1.f, 2.f}, var[] = {4.f, 0.25f, 1.f};
  for (int c = 0; c < 3; ++c) rm[c] = mean[c], rv[c] = var[c];
  find(*layer, "bn.weight").value.fill(3.f);
  find(*layer, "bn.bias").value.fill(1.f);
  Tensor x({4, 3}), y({4, 3});
  fill_pattern(x, 0.f);
  RunContext ctx{Phase::test, nullptr, {}};
  LayerIO io{{&x}, {&y}, {}, {}};
  layer->forward(io, ctx);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int c = i % 3;
    EXPECT_NEAR(y[i], (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * 3.0 + 1.0, 1e-5) << i;
  }
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(rm[c], mean[c]);
    EXPECT_EQ(rv[c], var[c]);
  }
}

TEST(BatchNorm, BackwardOverwritesParamGradsAndAccumulatesInputGrads) {
  auto layer = make_bn("{name: bn, type: batch_norm}", {4, 2, 3});
  Tensor x({4, 2, 3}), y({4, 2, 3}), dy({4, 2, 3}), dx({4, 2, 3});
  fill_pattern(x, 0.4f);
  fill_pattern(dy, 2.f);
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  Tensor first_dx(dx.shape()), first_dw({2});
  first_dx.copy_from(dx);
  first_dw.copy_from(find(*layer, "bn.weight").grad);
  layer->backward(io, ctx);
  for (int64_t i = 0; i < dx.numel(); ++i) EXPECT_FLOAT_EQ(dx[i], 2 * first_dx[i]) << i;
  for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(find(*layer, "bn.weight").grad[c], first_dw[c]) << c;
  // The bias gradient is the plain sum of dy over the channel.
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t s = 0; s < 3; ++s) sum += dy[(n * 2 + c) * 3 + s];
    EXPECT_NEAR(find(*layer, "bn.bias").grad[c], sum, 1e-5) << c;
  }
}

// Forward and backward in training against the definitions in double, on
// shapes for the CPU kernels' edges: batch 1, one channel, rows that are not
// a multiple of any vector width, [N, C] with one value per row, and sizes on
// both sides of the threading threshold.
class BatchNormReference : public ::testing::TestWithParam<Shape> {};

TEST_P(BatchNormReference, TrainForwardAndBackwardMatchDefinitions) {
  const Shape shape = GetParam();
  auto layer = make_bn("{name: bn, type: batch_norm}", shape);
  const int64_t channels = shape[1];
  Tensor& weight = find(*layer, "bn.weight").value;
  Tensor& bias = find(*layer, "bn.bias").value;
  for (int64_t c = 0; c < channels; ++c) weight[c] = 0.5f + 0.25f * c, bias[c] = 0.1f * c - 0.3f;
  Tensor x(shape), y(shape), dy(shape), dx(shape);
  fill_pattern(x, 0.3f);
  // dy without fill_pattern's trend: on the larger shapes its offset, shared
  // by a channel's values, would cancel in dy - mean(dy) beyond fp32.
  for (int64_t i = 0; i < dy.numel(); ++i) dy[i] = 2.f * std::cos(0.37f * i);
  dx.fill(0.5f);  // input gradients accumulate
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  layer->forward(io, ctx);
  layer->backward(io, ctx);

  const int64_t batch = shape[0], spatial = x.numel() / (batch * channels), count = batch * spatial;
  for (int64_t c = 0; c < channels; ++c) {
    const ChannelStats st = stats(x, c);
    const double inv_std = 1.0 / std::sqrt(st.biased_var + 1e-5);
    auto index = [&](int64_t n, int64_t s) { return (n * channels + c) * spatial + s; };
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t i = index(n, s);
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - st.mean) * inv_std;
      }
    EXPECT_NEAR(find(*layer, "bn.bias").grad[c], sum_dy, 1e-5 * (1 + std::abs(sum_dy))) << c;
    EXPECT_NEAR(find(*layer, "bn.weight").grad[c], sum_dy_xhat, 1e-5 * (1 + std::abs(sum_dy_xhat))) << c;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t i = index(n, s);
        const double xhat = (x[i] - st.mean) * inv_std;
        const double want_y = xhat * weight[c] + bias[c];
        const double want_dx = 0.5 + inv_std * weight[c] * (dy[i] - sum_dy / count - xhat * sum_dy_xhat / count);
        ASSERT_NEAR(y[i], want_y, 1e-5 * (1 + std::abs(want_y))) << "channel " << c << " element " << i;
        ASSERT_NEAR(dx[i], want_dx, 1e-5 * (1 + std::abs(want_dx))) << "channel " << c << " element " << i;
      }
  }
}

// Small planes go in blocks of channels: several blocks and a last, partial
// one ({4, 200, 3, 3}), threaded ({8, 1100, 2, 2}, {50, 1300}).
INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormReference,
                         ::testing::Values(Shape{1, 1, 37, 3}, Shape{3, 5, 17}, Shape{40, 3}, Shape{2, 1, 131, 129},
                                           Shape{3, 7, 61, 23}, Shape{4, 200, 3, 3}, Shape{8, 1100, 2, 2},
                                           Shape{50, 1300}));

// Channels whose values spread some 1e-6 of their mean: sums of plain squares
// would lose the variance to the mean's square (about 1e-3 of it in double).
TEST(BatchNorm, VarianceOfValuesFarFromZeroKeepsItsPrecision) {
  const Shape shape = {16, 2, 40};
  auto layer = make_bn("{name: bn, type: batch_norm, momentum: 1}", shape);
  Tensor x(shape), y(shape);
  // Channel 0 around 3e4, channel 1 around -7e3.
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = (i % 80 < 40 ? 3e4f : -7e3f) + 0.01f * static_cast<float>(i % 7);
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {}, {}};
  layer->forward(io, ctx);
  for (int64_t c = 0; c < 2; ++c) {
    const ChannelStats st = stats(x, c);
    EXPECT_NEAR(find(*layer, "bn.running_var").value[c], st.unbiased_var, 1e-5 * st.unbiased_var) << c;
  }
}

TEST(BatchNorm, TrainingNeedsMoreThanOneValuePerChannel) {
  auto layer = make_bn("{name: bn, type: batch_norm}", {1, 3});
  Tensor x({1, 3}), y({1, 3});
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {}, {}};
  EXPECT_THROW(layer->forward(io, ctx), Error);
}

TEST(BatchNorm, RejectsInputWithoutChannels) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: bn, type: batch_norm}", "t"));
  EXPECT_THROW(layer->reshape({{8}}), ConfigError);
}

}  // namespace poseidon::testing
