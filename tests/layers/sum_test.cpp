// Element-wise sum: gradient cases with and without coefficients, values and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("sum_plain", "{name: s, type: sum}", {{2, 3, 4}, {2, 3, 4}});
GRAD_CASE("sum_coefficients", "{name: s, type: sum, coefficients: [0.5, -2, 3]}", {{2, 3}, {2, 3}, {2, 3}});
// One input, two inputs (added in one pass) and three (the third in a pass
// of its own) take different loops.
GRAD_CASE("sum_single_input", "{name: s, type: sum, coefficients: [-1.5]}", {{2, 3}});
// A fused ReLU (core/relu_fusion.h). The inputs are odd multiples of half
// their spacing, so with coefficients 1 and 2 no output lies within a step
// of the ReLU's kink at 0 (with 1 and 1 some would be exactly 0).
GRAD_CASE(.name = "sum_relu_fused", .yaml = "{name: s, type: sum, coefficients: [1, 2]}",
          .inputs = {{2, 3, 4}, {2, 3, 4}}, .fuse_relu = true);

namespace {
std::unique_ptr<Layer> make_sum(const std::string& yaml) {
  return LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
}
}  // namespace

TEST(Sum, WeighsEachInputByItsCoefficient) {
  auto layer = make_sum("{name: s, type: sum, coefficients: [0.5, -2, 3]}");
  Tensor a({5}), b({5}), c({5}), y({5});
  for (int64_t i = 0; i < 5; ++i) a[i] = i, b[i] = 10.f - i, c[i] = 0.25f * i;
  layer->reshape({a.shape(), b.shape(), c.shape()});
  LayerIO io{{&a, &b, &c}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  for (int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y[i], 0.5f * a[i] - 2.f * b[i] + 3.f * c[i]) << i;
}

// Large enough for threads, not a multiple of their chunks: three inputs,
// forward and backward, the second input without a gradient.
TEST(Sum, ThreeLargeInputsForwardAndBackward) {
  auto layer = make_sum("{name: s, type: sum, coefficients: [0.5, -2, 3]}");
  const Shape shape = {3, 7, 41, 43};
  Tensor a(shape), b(shape), c(shape), y(shape), dy(shape), da(shape), dc(shape);
  for (int64_t i = 0; i < a.numel(); ++i) a[i] = 0.001f * i, b[i] = 1.f - 0.5f * i, c[i] = 0.25f, dy[i] = 0.01f * i;
  da.fill(1.f);
  dc.fill(-1.f);
  layer->reshape({shape, shape, shape});
  LayerIO io{{&a, &b, &c}, {&y}, {&dy}, {&da, nullptr, &dc}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  // A few roundings of the terms: the kernels may fuse a multiply and an add.
  auto near = [](float got, std::initializer_list<double> terms) {
    double sum = 0, size = 0;
    for (double t : terms) sum += t, size += std::abs(t);
    return std::abs(got - sum) <= 4e-7 * size;
  };
  for (int64_t i = 0; i < y.numel(); ++i) {
    ASSERT_TRUE(near(y[i], {0.5 * a[i], -2.0 * b[i], 3.0 * c[i]})) << i << ": " << y[i];
    ASSERT_TRUE(near(da[i], {1.0, 0.5 * dy[i]})) << i << ": " << da[i];
    ASSERT_TRUE(near(dc[i], {-1.0, 3.0 * dy[i]})) << i << ": " << dc[i];
  }
}

TEST(Sum, DefaultsToPlainSum) {
  auto layer = make_sum("{name: s, type: sum}");
  Tensor a({3}), b({3}), y({3});
  for (int64_t i = 0; i < 3; ++i) a[i] = i + 1.f, b[i] = 7.f * i;
  layer->reshape({a.shape(), b.shape()});
  LayerIO io{{&a, &b}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(y[i], a[i] + b[i]) << i;
}

TEST(Sum, RejectsCoefficientCountOtherThanInputCount) {
  auto layer = make_sum("{name: s, type: sum, coefficients: [1, 2, 3]}");
  try {
    layer->reshape({{4}, {4}});
    FAIL() << "three coefficients for two inputs were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("coefficients"), std::string::npos) << e.what();
  }
}

TEST(Sum, RejectsUnequalShapes) {
  auto layer = make_sum("{name: adder, type: sum}");
  try {
    layer->reshape({{2, 3}, {3, 2}});
    FAIL() << "unequal shapes were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("adder"), std::string::npos) << e.what();
  }
}

}  // namespace poseidon::testing
