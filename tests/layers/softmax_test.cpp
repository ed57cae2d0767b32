// Softmax: gradient cases on several axes and values against std::exp.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("softmax", "{name: sm, type: softmax}", {{3, 5}});
GRAD_CASE("softmax_4d", "{name: sm, type: softmax}", {{2, 3, 2, 2}});
GRAD_CASE("softmax_last_axis", "{name: sm, type: softmax, axis: -1}", {{2, 3, 4}});

namespace {
Tensor softmax(const std::string& yaml, const Tensor& x) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  Tensor y(layer->reshape({x.shape()}).at(0));
  LayerIO io{{&x}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  return y;
}
}  // namespace

TEST(Softmax, NormalisesAlongAStridedAxis) {
  Tensor x({2, 3, 2});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = std::cos(1.7f * i) * 2.f;
  Tensor y = softmax("{name: sm, type: softmax, axis: 1}", x);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t w = 0; w < 2; ++w) {
      double sum = 0;
      for (int64_t c = 0; c < 3; ++c) sum += std::exp(double(x[(n * 3 + c) * 2 + w]));
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t i = (n * 3 + c) * 2 + w;
        EXPECT_NEAR(y[i], std::exp(double(x[i])) / sum, 1e-6) << i;
      }
    }
}

// Large enough for the threaded loops.
TEST(Softmax, LargeInputRowsMatchTheDefinition) {
  Tensor x({300, 200});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = std::sin(0.37f * i) * 4.f;
  Tensor y = softmax("{name: sm, type: softmax}", x);
  for (int64_t n = 0; n < 300; ++n) {
    double sum = 0;
    for (int64_t c = 0; c < 200; ++c) sum += std::exp(double(x[n * 200 + c]));
    for (int64_t c = 0; c < 200; ++c)
      ASSERT_NEAR(y[n * 200 + c], std::exp(double(x[n * 200 + c])) / sum, 1e-6) << n << "," << c;
  }
}

TEST(Softmax, StableForLargeInputs) {
  Tensor x({1, 2});
  x[0] = 1000.f;
  x[1] = 1001.f;
  Tensor y = softmax("{name: sm, type: softmax}", x);
  EXPECT_NEAR(y[0], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(y[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(Softmax, BackwardAccumulates) {
  auto layer =
      LayerRegistry::instance().create(ConfigNode::parse("{name: sm, type: softmax}", "t"));
  Tensor x({1, 3}), y({1, 3}), dy({1, 3}), dx({1, 3});
  x[0] = 0.1f, x[1] = -0.4f, x[2] = 0.8f;
  dy[0] = 1.f, dy[1] = 2.f, dy[2] = -1.f;
  dx.fill(0.5f);
  layer->reshape({x.shape()});
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  const double dot = double(dy[0]) * y[0] + double(dy[1]) * y[1] + double(dy[2]) * y[2];
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(dx[i], 0.5 + y[i] * (dy[i] - dot), 1e-6) << i;
}

TEST(Softmax, RejectsAxisOutOfRange) {
  Tensor x({2, 3});
  EXPECT_THROW(softmax("{name: sm, type: softmax, axis: 2}", x), ConfigError);
}

}  // namespace poseidon::testing
